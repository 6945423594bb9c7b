-- Each request creates a monthly subscription on a random address of the schedule store
-- (its queued charge is planned in the same request). bench/run.py passes the first and last
-- address id and a date after "--".
local first, last, date = 1, 1, "2030-01-01"
init = function(args)
  first, last, date = tonumber(args[1]), tonumber(args[2]), args[3]
  math.randomseed(os.time())
end
request = function()
  local body = string.format(
    '{"address_id":%d,"product_title":"Tea","price":"9.90","quantity":1,"charge_interval_frequency":1,' ..
    '"order_interval_frequency":1,"order_interval_unit":"month","next_charge_scheduled_at":"%s"}',
    math.random(first, last), date)
  return wrk.format("POST", "/subscriptions", nil, body)
end
