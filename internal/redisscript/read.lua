-- Sluice read: the raw fields of a bucket hash and Redis TIME, from the
-- same server at the same instant. KEYS[1] bucket hash.
-- Returns {seconds, microseconds, field1, value1, ...}.
local t = redis.call('TIME')
local out = {t[1], t[2]}
local h = redis.call('HGETALL', KEYS[1])
for i = 1, #h do
  out[#out + 1] = h[i]
end
return out
