
-- Sluice acquire: take ARGV[2] tokens for app ARGV[1] from the bucket hash
-- KEYS[1]. The answer is seven integers: {code, remaining, retry_us,
-- reset_us, capacity, permits_micro, period} (docs/protocol.md). A client
-- that passes ARGV[3] = '2' (protocol 2) gets two more on allowed, denied
-- and would-deny answers: lease_ms (0 when not in lease mode) and shadow
-- (1 in shadow mode, else 0); ARGV[3] = '3' (protocol 3) adds a third,
-- the bucket's reserve. A bucket whose shadow field is '1' never denies:
-- where it would, it answers code 2 (would deny) and takes nothing.
-- ARGV[4] = '1' marks the request critical: it may take the bucket's
-- reserve, which every other request must leave.
local n = count(ARGV[2])
if not n or n < 1 then
  return {-4, 0, 0, 0, 0, 0, 0}
end
local f = redis.call('HMGET', KEYS[1], 'capacity', 'permits', 'period', 'apps', 'tokens', 'ts', 'lease_ms', 'shadow',
  'reserve')
local capacity, pm, period = limit_of(f[1], f[2], f[3])
if not capacity then
  return {-1, 0, 0, 0, 0, 0, 0}
end
if not app_ok(ARGV[1], f[4]) then
  return {-2, 0, 0, 0, capacity, pm, period}
end
local res = kept(f[9], capacity, false)
local r = res
if ARGV[4] == '1' then r = 0 end
if n > capacity - r then
  return {-3, 0, 0, 0, capacity, pm, period}
end
local tokens, ts = refill(f[5], f[6], now_us(), capacity, pm, period)
local shadow = f[8] == '1'
local lease, sh
if ARGV[3] == '2' or ARGV[3] == '3' then
  lease, sh = tonumber(f[7]) or 0, 0
  if shadow then sh = 1 end
end
if ARGV[3] ~= '3' then res = nil end
local left, answer = take(tokens, n, capacity, pm, period, shadow, r, lease, sh, res)
-- A denial writes nothing: refill is a pure function of time, so the
-- stored (tokens, ts) pair still yields the same count later.
if left then put(KEYS[1], left, ts) end
return answer
