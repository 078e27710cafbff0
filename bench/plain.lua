-- A minimal token bucket on Redis's clock, as a service might write it
-- for itself: one EVALSHA per call, no config lookup, no app check.
-- KEYS[1]: the bucket hash
-- ARGV: capacity, rate in tokens per second, tokens requested
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local s = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(s[1]) or capacity
local ts = tonumber(s[2]) or now
if now > ts then
  tokens = math.min(capacity, tokens + (now - ts) * rate / 1000000)
end
if tokens < n then
  return {0, math.floor(tokens)}
end
tokens = tokens - n
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'ts', string.format('%d', now))
return {1, math.floor(tokens)}
