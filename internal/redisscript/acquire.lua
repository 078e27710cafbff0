-- Sluice acquire: take ARGV[2] tokens for app ARGV[1] from the bucket hash
-- KEYS[1]. One atomic call; the only clock is Redis TIME. The answer is an
-- array of seven integers: {code, remaining, retry_us, reset_us, capacity,
-- permits_micro, period} (docs/protocol.md). A client that passes ARGV[3]
-- = '2' gets an eighth, lease_ms, on allowed and denied answers of a bucket
-- in lease mode. A bucket whose shadow field is '1' never denies: where
-- it would, it answers code 2 (would deny) and takes nothing. Every value
-- is a whole number below 2^53, so Redis converts it to an integer reply
-- exactly. State is written with string.format because tostring loses
-- precision.
local MAX_N = 1000000000
local MAX_US = 1000000000000000 -- durations are capped at 1e15 us (about 31 years)

-- n: a plain decimal integer 1..1e9; no sign, exponent, fraction or spaces.
local nstr = ARGV[2]
if type(nstr) ~= 'string' or #nstr > 10 or not string.find(nstr, '^[1-9][0-9]*$') then
  return {-4, 0, 0, 0, 0, 0, 0}
end
local n = tonumber(nstr)
if n > MAX_N then
  return {-4, 0, 0, 0, 0, 0, 0}
end

local f = redis.call('HMGET', KEYS[1], 'capacity', 'permits', 'period', 'apps', 'tokens', 'ts', 'lease_ms', 'shadow')
local capacity = tonumber(f[1])
local permits = tonumber(f[2])
local period = tonumber(f[3])
if not capacity or not permits or not period or capacity < 1 or permits <= 0 or period < 1 then
  return {-1, 0, 0, 0, 0, 0, 0}
end
-- permits has at most 6 decimals, so this is the exact count of millionths.
local pm = math.floor(permits * 1000000 + 0.5)

-- Exact match: ",app," inside ",a,b,"; an app containing a comma could
-- straddle two entries, so it never matches.
local app = ARGV[1]
local apps = f[4]
if type(app) ~= 'string' or app == '' or string.find(app, ',', 1, true)
    or not apps or not string.find(apps, ',' .. app .. ',', 1, true) then
  return {-2, 0, 0, 0, capacity, pm, period}
end
if n > capacity then
  return {-3, 0, 0, 0, capacity, pm, period}
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tokens = tonumber(f[5])
local ts = tonumber(f[6])
if not tokens or not ts then
  tokens, ts = capacity, now -- no state yet: a bucket starts full
end
-- A clock that went backwards counts as no time passed; ts never moves back.
if now > ts then
  tokens = tokens + (now - ts) * pm / (period * 1000000000000)
  ts = now
end
if tokens > capacity then tokens = capacity end
if tokens < 0 then tokens = 0 end

-- Microseconds until the bucket holds want tokens at this rate, rounded up.
local function until_us(want)
  if want <= 0 then return 0 end
  local us = math.ceil(want * period * 1000000000000 / pm)
  if us > MAX_US then return MAX_US end
  return us
end

if tokens >= n then
  tokens = tokens - n
  local whole = math.floor(tokens)
  -- A whole count (a full bucket less n, the common case) prints the same
  -- with '%d' as with '%.17g', and faster.
  local fmt = '%.17g'
  if whole == tokens then fmt = '%d' end
  redis.call('HSET', KEYS[1], 'tokens', string.format(fmt, tokens), 'ts', string.format('%d', ts))
  if ARGV[3] == '2' and f[7] then
    return {1, whole, 0, until_us(capacity - tokens), capacity, pm, period, tonumber(f[7]) or 0}
  end
  return {1, whole, 0, until_us(capacity - tokens), capacity, pm, period}
end
-- Denied (or, in shadow mode, would deny): nothing is written. Refill is
-- a pure function of time, so the stored (tokens, ts) pair still yields
-- the same count later.
local code = 0
if f[8] == '1' then code = 2 end
if ARGV[3] == '2' and f[7] then
  return {code, math.floor(tokens), until_us(n - tokens), until_us(capacity - tokens), capacity, pm, period,
    tonumber(f[7]) or 0}
end
return {code, math.floor(tokens), until_us(n - tokens), until_us(capacity - tokens), capacity, pm, period}
