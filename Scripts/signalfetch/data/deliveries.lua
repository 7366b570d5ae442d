-- wrk's deliveries: POST /v1/deliveries to user000…user{SCALE_USERS-1} in turn, with the delivery token SCALE_TOKEN.
local users = tonumber(os.getenv("SCALE_USERS"))
local token = os.getenv("SCALE_TOKEN")
local n = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. token
request = function()
  n = n + 1
  local body = string.format(
    '{"to":"user%03d","from":"bench@example.com","subject":"Scale %d","body":"A short body for message %d."}',
    n % users, n, n)
  return wrk.format(nil, "/v1/deliveries", nil, body)
end
