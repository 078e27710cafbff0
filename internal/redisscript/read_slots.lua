-- Sluice read slots: the slot set KEYS[1] of a concurrency limit (or of
-- one key of a keyed one) at Redis TIME, read-only. Returns {seconds,
-- microseconds, in_use, held, first, last}: the slots not yet expired,
-- every member (expired ones not purged yet included), and the expiries
-- of the first and last of them in microseconds (0 when none).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local live = redis.call('ZCOUNT', KEYS[1], string.format('(%d', now), '+inf')
local held = redis.call('ZCARD', KEYS[1])
local first = redis.call('ZRANGEBYSCORE', KEYS[1], string.format('(%d', now), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
return {t[1], t[2], live, held, first[2] or '0', last[2] or '0'}
