-- A classic token bucket as many services write it: the caller passes its
-- own clock, so skewed clients disagree about how many tokens there are.
-- KEYS[1]: the bucket hash
-- ARGV: capacity, refill rate in tokens per second, now in microseconds
--       (client clock), tokens requested
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local n = tonumber(ARGV[4])

local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
if tokens == nil then
	tokens = capacity
	ts = now
end
local elapsed = now - ts
if elapsed < 0 then
	elapsed = 0
end
tokens = math.min(capacity, tokens + elapsed * rate / 1000000)

local allowed = 0
if tokens >= n then
	tokens = tokens - n
	allowed = 1
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.6f', tokens), 'ts', string.format('%d', now))
-- Forget an idle bucket once it would be full again.
redis.call('PEXPIRE', KEYS[1], math.ceil(capacity / rate * 1000) + 1000)
return {allowed, math.floor(tokens)}
