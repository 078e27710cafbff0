
-- The slot part of the core: concurrency limits (docs/protocol.md,
-- "Concurrency limits"). A limit's slots in use are a sorted set, one
-- member per slot id scored by the time it expires (microseconds of Redis
-- TIME); the expired ones are purged by every call before it counts.
local MAX_SLOT_ID = 64
local MAX_SLOT_MS = 86400000

-- slot_id_ok: a slot id is 1 to 64 letters, digits, '-', '_', '.' or ':'.
-- The caller chooses it (a random one), so a take that is sent again takes
-- no second slot.
local function slot_id_ok(s)
  return type(s) == 'string' and #s >= 1 and #s <= MAX_SLOT_ID and string.find(s, '^[%w_.:-]+$') ~= nil
end

-- slot_ms_of is the slot lease time of a concurrency limit, 1..MAX_SLOT_MS
-- milliseconds, or nil when the hash is not a concurrency limit.
local function slot_ms_of(kind, ms)
  if kind ~= 'concurrency' then return nil end
  ms = tonumber(ms)
  if not ms or ms < 1 or ms > MAX_SLOT_MS or ms ~= math.floor(ms) then return nil end
  return ms
end

-- slots_in_use purges the slots of set that expired at now and counts the
-- others.
local function slots_in_use(set, now)
  redis.call('ZREMRANGEBYSCORE', set, '-inf', string.format('%d', now))
  return redis.call('ZCARD', set)
end

-- slot_hold writes slot id expiring at exp, and keeps the set's own expiry
-- at or after every slot's: it only grows, so a slot taken under a longer
-- lease time than today's keeps its set alive. When the set would expire
-- within a lease time, it is moved to two lease times from now, so that
-- most calls read the expiry without writing it. An idle set (its slots
-- expired, none released) is gone two lease times after its last take or
-- renewal at the latest; a set emptied by releases is gone at once.
local function slot_hold(set, id, exp, ms)
  local added = redis.call('ZADD', set, string.format('%d', exp), id)
  if redis.call('PTTL', set) < ms + 2 then
    redis.call('PEXPIRE', set, string.format('%d', 2 * ms))
  end
  return added
end

-- slot_retry is the time until the first slot of set expires: when a slot
-- comes back at the latest, if no one releases one sooner.
local function slot_retry(set, now)
  local first = redis.call('ZRANGE', set, 0, 0, 'WITHSCORES')
  if not first[2] then return 0 end
  return us(tonumber(first[2]) - now)
end

-- slot_op runs op ('take', 'release' or 'renew') of slot id on set, a
-- limit of limit slots with a lease time of ms milliseconds, at now; src
-- is where the limit came from (0 the limit's own, 1 an exact override, 2
-- a prefix override). The answer is {code, in_use, limit, retry_us,
-- slot_ms, source, shadow}, built in one constructor (a table that grows
-- is rehashed):
--   take: a free slot is taken (1); a slot id already held is renewed and
--     answered as taken (a take sent again takes one slot); at the limit,
--     denied (0) with retry_us until the first slot expires, or, in shadow
--     mode, taken anyway and answered would deny (2), so that in_use counts
--     what runs.
--   release: 1 when the slot was held and is now free, 0 when it was not
--     (released before, expired, never taken): a release frees nothing twice.
--   renew: 1 when the slot was held and now expires ms from now, 0 when it
--     was not held (expired or released: take a new one).
local function slot_op(op, set, id, now, limit, ms, shadow, src)
  local sh = 0
  if shadow then sh = 1 end
  local n = slots_in_use(set, now)
  local exp = now + ms * 1000
  if op == 'release' then
    local gone = redis.call('ZREM', set, id)
    return {gone, n - gone, limit, 0, ms, src, sh}
  end
  if op == 'renew' or n >= limit then
    if not redis.call('ZSCORE', set, id) then
      if op == 'renew' then return {0, n, limit, 0, ms, src, sh} end
      local retry = slot_retry(set, now)
      if not shadow then return {0, n, limit, retry, ms, src, sh} end
      return {2, n + slot_hold(set, id, exp, ms), limit, retry, ms, src, sh}
    end
    slot_hold(set, id, exp, ms)
    return {1, n, limit, 0, ms, src, sh}
  end
  return {1, n + slot_hold(set, id, exp, ms), limit, 0, ms, src, sh}
end
