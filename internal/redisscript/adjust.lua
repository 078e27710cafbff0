-- Sluice adjust: give tokens back to, or take them after the fact from,
-- the bucket hash KEYS[1] for app ARGV[1]. ARGV[2] is the operation,
-- ARGV[3] n (a plain decimal integer 1..1e9):
--   refund:  add n tokens, never above capacity;
--   charge:  take n tokens whatever is left; the bucket may go into debt
--            (negative tokens), never below -capacity;
--   reserve: take n tokens now if that leaves at least -capacity, else
--            take nothing; the caller waits until the debt is paid.
-- The answer is eight integers: {code, remaining, retry_us, reset_us,
-- capacity, permits_micro, period, applied} (docs/protocol.md).
local MAX_N = 1000000000
local MAX_US = 1000000000000000
local op, nstr = ARGV[2], ARGV[3]
if (op ~= 'refund' and op ~= 'charge' and op ~= 'reserve') or type(nstr) ~= 'string' or #nstr > 10
    or not string.find(nstr, '^[1-9][0-9]*$') then
  return {-4, 0, 0, 0, 0, 0, 0, 0}
end
local n = tonumber(nstr)
if n > MAX_N then
  return {-4, 0, 0, 0, 0, 0, 0, 0}
end
local f = redis.call('HMGET', KEYS[1], 'capacity', 'permits', 'period', 'apps', 'tokens', 'ts')
local capacity, permits, period = tonumber(f[1]), tonumber(f[2]), tonumber(f[3])
if not capacity or not permits or not period or capacity < 1 or permits <= 0 or period < 1 then
  return {-1, 0, 0, 0, 0, 0, 0, 0}
end
local pm = math.floor(permits * 1000000 + 0.5)
local app, apps = ARGV[1], f[4]
if type(app) ~= 'string' or app == '' or string.find(app, ',', 1, true)
    or not apps or not string.find(apps, ',' .. app .. ',', 1, true) then
  return {-2, 0, 0, 0, capacity, pm, period, 0}
end
if op == 'reserve' and n > capacity then
  return {-3, 0, 0, 0, capacity, pm, period, 0}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tokens, ts = tonumber(f[5]), tonumber(f[6])
if not tokens or not ts then tokens, ts = capacity, now end
if now > ts then
  tokens = tokens + (now - ts) * pm / (period * 1000000000000)
  ts = now
end
if tokens > capacity then tokens = capacity end
local floor = -capacity -- the deepest debt
if tokens < floor then tokens = floor end
local function until_us(want)
  if want <= 0 then return 0 end
  local us = math.ceil(want * period * 1000000000000 / pm)
  if us > MAX_US then return MAX_US end
  return us
end
local before = tokens
local code, retry = 1, 0
if op == 'refund' then
  tokens = tokens + n
  if tokens > capacity then tokens = capacity end
elseif op == 'charge' then
  tokens = tokens - n
  if tokens < floor then tokens = floor end
else
  if tokens - n < floor then
    -- Too deep: nothing taken; retry when taking n leaves exactly -capacity.
    return {0, math.floor(tokens), until_us(floor + n - tokens), until_us(capacity - tokens), capacity, pm, period, 0}
  end
  tokens = tokens - n
  -- The reservation is honoured once the debt is paid.
  retry = until_us(-tokens)
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'ts', string.format('%d', ts))
local applied = tokens - before
if applied < 0 then applied = -applied end
return {code, math.floor(tokens), retry, until_us(capacity - tokens), capacity, pm, period,
  math.floor(applied + 0.5)}
