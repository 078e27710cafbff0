-- Sluice lease: for app ARGV[1], give back ARGV[3] unused tokens of an
-- ended lease and take up to ARGV[2] tokens as a new lease, from the
-- bucket hash KEYS[1]. One atomic call on Redis TIME, like acquire: the
-- tokens are taken from the same bucket, so leased and single acquires
-- share one limit. The answer is an array of eight integers: {code,
-- granted, remaining, retry_us, capacity, permits_micro, period, lease_ms}
-- (docs/protocol.md).
local MAX_N = 1000000000
local MAX_US = 1000000000000000

-- want and back: plain decimal integers 0..1e9.
local function count(s)
  if type(s) ~= 'string' or #s > 10 or not string.find(s, '^[0-9]+$') or (#s > 1 and string.sub(s, 1, 1) == '0') then
    return nil
  end
  local v = tonumber(s)
  if v > MAX_N then return nil end
  return v
end
local want, back = count(ARGV[2]), count(ARGV[3])
if not want or not back then
  return {-4, 0, 0, 0, 0, 0, 0, 0}
end

local f = redis.call('HMGET', KEYS[1], 'capacity', 'permits', 'period', 'apps', 'tokens', 'ts', 'lease_ms')
local capacity = tonumber(f[1])
local permits = tonumber(f[2])
local period = tonumber(f[3])
if not capacity or not permits or not period or capacity < 1 or permits <= 0 or period < 1 then
  return {-1, 0, 0, 0, 0, 0, 0, 0}
end
local pm = math.floor(permits * 1000000 + 0.5)
local lease = tonumber(f[7]) or 0

local app = ARGV[1]
local apps = f[4]
if type(app) ~= 'string' or app == '' or string.find(app, ',', 1, true)
    or not apps or not string.find(apps, ',' .. app .. ',', 1, true) then
  return {-2, 0, 0, 0, capacity, pm, period, lease}
end
-- Not in lease mode (any more): take back what is returned, grant nothing.
if lease <= 0 then want = 0 end
if want > capacity then want = capacity end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tokens = tonumber(f[5])
local ts = tonumber(f[6])
if not tokens or not ts then
  tokens, ts = capacity, now
end
if now > ts then
  tokens = tokens + (now - ts) * pm / (period * 1000000000000)
  ts = now
end
-- Returned tokens were taken and not used: they go back, never above capacity.
tokens = tokens + back
if tokens > capacity then tokens = capacity end
if tokens < 0 then tokens = 0 end

local granted = math.floor(tokens)
if granted > want then granted = want end
tokens = tokens - granted
if granted > 0 or back > 0 then
  local fmt = '%.17g'
  if math.floor(tokens) == tokens then fmt = '%d' end
  redis.call('HSET', KEYS[1], 'tokens', string.format(fmt, tokens), 'ts', string.format('%d', ts))
end
-- retry_us: when nothing was granted, the time until one token is there.
local retry = 0
if granted == 0 and want > 0 then
  retry = math.ceil((1 - tokens) * period * 1000000000000 / pm)
  if retry > MAX_US then retry = MAX_US end
  if retry < 0 then retry = 0 end
end
local code = 0
if granted > 0 then code = 1 end
return {code, granted, math.floor(tokens), retry, capacity, pm, period, lease}
