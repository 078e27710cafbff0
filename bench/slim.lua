-- A prototype, for measurement only, of the versioned acquire discussed in
-- docs/benchmarks.md: the client passes the config it knows with the
-- bucket's (id, version); while the hash holds that pair, the script
-- reads only tokens, ts, id and version, and answers four integers
-- {code, remaining, retry_us, reset_us}; otherwise it answers {-5} and the
-- client would call the full acquire. It keeps the check of n and the
-- refill arithmetic of acquire.lua, and not the app check (the client
-- would have learnt at that version that the app may use the bucket).
-- KEYS[1]: the bucket hash
-- ARGV: n, id, version, capacity, permits_micro, period, shadow
local nstr = ARGV[1]
if #nstr > 10 or not string.find(nstr, '^[1-9][0-9]*$') then
  return {-4, 0, 0, 0}
end
local n = tonumber(nstr)
local f = redis.call('HMGET', KEYS[1], 'tokens', 'ts', 'id', 'version')
if f[3] ~= ARGV[2] or f[4] ~= ARGV[3] then
  return {-5, 0, 0, 0}
end
local capacity, pm, period = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tokens = tonumber(f[1])
local ts = tonumber(f[2])
if not tokens or not ts then
  tokens, ts = capacity, now
end
if now > ts then
  tokens = tokens + (now - ts) * pm / (period * 1000000000000)
  ts = now
end
if tokens > capacity then tokens = capacity end
if tokens < 0 then tokens = 0 end
local function until_us(want)
  if want <= 0 then return 0 end
  return math.min(math.ceil(want * period * 1000000000000 / pm), 1000000000000000)
end
if tokens >= n then
  tokens = tokens - n
  local whole = math.floor(tokens)
  local fmt = '%.17g'
  if whole == tokens then fmt = '%d' end
  redis.call('HSET', KEYS[1], 'tokens', string.format(fmt, tokens), 'ts', string.format('%d', ts))
  return {1, whole, 0, until_us(capacity - tokens)}
end
local code = 0
if ARGV[7] == '1' then code = 2 end
return {code, math.floor(tokens), until_us(n - tokens), until_us(capacity - tokens)}
