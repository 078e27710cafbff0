
-- Sluice lease: for app ARGV[1], give back ARGV[3] unused tokens of an
-- ended lease and take up to ARGV[2] tokens as a new lease, from the
-- bucket hash KEYS[1]. The tokens are taken from the same bucket as
-- acquire's, so leased and single acquires share one limit. A lease is
-- never critical: it leaves the bucket's reserve. The answer is eight
-- integers: {code, granted, remaining, retry_us, capacity, permits_micro,
-- period, lease_ms} (docs/protocol.md).
local want, back = count(ARGV[2]), count(ARGV[3])
if not want or not back then
  return {-4, 0, 0, 0, 0, 0, 0, 0}
end
local f = redis.call('HMGET', KEYS[1], 'capacity', 'permits', 'period', 'apps', 'tokens', 'ts', 'lease_ms', 'kind',
  'reserve', 'st')
local capacity, pm, period = limit_of(f[1], f[2], f[3])
-- Only a token bucket has tokens to lease: a quota or another kind is not
-- this script's.
if not capacity or (f[8] and f[8] ~= 'bucket') then
  return {-1, 0, 0, 0, 0, 0, 0, 0}
end
local lease = tonumber(f[7]) or 0
if not app_ok(ARGV[1], f[4]) then
  return {-2, 0, 0, 0, capacity, pm, period, lease}
end
-- Not in lease mode (any more): take back what is returned, grant nothing.
if lease <= 0 then want = 0 end
local r = kept(f[9], capacity, false)
if want > capacity - r then want = capacity - r end
local tokens, ts, binary = stored(f[10], f[5], f[6])
tokens, ts = refill(tokens, ts, now_us(), capacity, pm, period)
-- Returned tokens were taken and not used: they go back, never above
-- capacity. A debt stays a debt.
tokens = tokens + back
if tokens > capacity then tokens = capacity end
local granted = above(tokens, r)
if granted > want then granted = want end
tokens = tokens - granted
if granted > 0 or back > 0 then put(KEYS[1], tokens, ts, binary) end
-- retry_us: when nothing was granted, the time until one token above the
-- reserve is there.
local retry = 0
if granted == 0 and want > 0 then retry = until_us(1 + r - tokens, pm, period) end
local code = 0
if granted > 0 then code = 1 end
return {code, granted, above(tokens, r), retry, capacity, pm, period, lease}
