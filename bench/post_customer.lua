-- Each request creates a customer with a unique email (wrk runs one Lua state per thread).
local counter = 0
local thread_tag = tostring(math.random(1, 1000000000))
request = function()
  counter = counter + 1
  local body = string.format(
    '{"email":"bench-%s-%d@example.com","first_name":"Bench","last_name":"Mark"}', thread_tag, counter)
  return wrk.format("POST", "/customers", nil, body)
end
