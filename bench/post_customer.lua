-- Each request creates a customer with a unique email. wrk runs one Lua state per thread;
-- bench/run.py passes a fresh tag per run (after "--"), so rounds never repeat an email.
local counter = 0
local tag = "x"
init = function(args)
  tag = args[1] or tostring(os.time())
end
request = function()
  counter = counter + 1
  local body = string.format(
    '{"email":"bench-%s-%d@example.com","first_name":"Bench","last_name":"Mark"}', tag, counter)
  return wrk.format("POST", "/customers", nil, body)
end
