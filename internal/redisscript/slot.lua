-- Sluice token core, shared by every script that takes or returns tokens
-- (docs/protocol.md, "The Lua core"). Lua has no include: the scripts are
-- this file followed by their own part. The only clock is Redis TIME, in
-- microseconds. Numbers are written with string.format, never tostring,
-- which loses precision.
local MAX_N = 1000000000
local MAX_US = 1000000000000000 -- durations are capped at 1e15 us (about 31 years)

-- count parses a plain decimal integer 0..1e9: no sign, exponent,
-- fraction, spaces or leading zero. Anything else is nil. Most calls take
-- one token, and a pattern match costs more than the rest of the check.
local function count(s)
  if s == '1' then return 1 end
  if type(s) ~= 'string' or #s > 10 then return nil end
  if s == '0' then return 0 end
  if not string.find(s, '^[1-9][0-9]*$') then return nil end
  local v = tonumber(s)
  if v > MAX_N then return nil end
  return v
end

-- limit_of checks a stored limit: capacity, permits in millionths (permits
-- has at most 6 decimals, so this is exact) and period, or nil.
local function limit_of(c, p, d)
  local capacity, permits, period = tonumber(c), tonumber(p), tonumber(d)
  if not capacity or not permits or not period or capacity < 1 or permits <= 0 or period < 1 then
    return nil
  end
  return capacity, math.floor(permits * 1000000 + 0.5), period
end

-- kind_limit checks a stored limit of kind k (absent: a token bucket) and
-- returns capacity, permits in millionths and period, or nil: a token
-- bucket's as limit_of reads it; a limit of a kind that counts rather
-- than refills (a concurrency limit's slots) is its capacity, with
-- permits and period 0.
local function kind_limit(k, c, p, d)
  if not k or k == 'bucket' then return limit_of(c, p, d) end
  local q = tonumber(c)
  if not q or q < 1 or q % 1 ~= 0 then return nil end
  return q, 0, 0
end

-- app_ok is the exact match of app in ",a,b,"; an app containing a comma
-- could straddle two entries, so it never matches.
local function app_ok(app, apps)
  return type(app) == 'string' and app ~= '' and apps ~= nil and apps ~= false
    and not string.find(app, ',', 1, true) and string.find(apps, ',' .. app .. ',', 1, true) ~= nil
end

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- refill returns the tokens and ts of a bucket that held tokens at ts, at
-- now: no state is a full bucket; a clock that went backwards adds
-- nothing and ts never moves back; never above capacity. A debt (negative
-- tokens) is kept: it refills like any count.
local function refill(tokens, ts, now, capacity, pm, period)
  tokens, ts = tonumber(tokens), tonumber(ts)
  if not tokens or not ts then return capacity, now end
  if now > ts then
    tokens = tokens + (now - ts) * pm / (period * 1000000000000)
    ts = now
  end
  if tokens > capacity then tokens = capacity end
  return tokens, ts
end

-- us rounds a duration up to whole microseconds, 0..MAX_US.
local function us(x)
  if x <= 0 then return 0 end
  x = math.ceil(x)
  if x > MAX_US then return MAX_US end
  return x
end

-- per_token is the time in microseconds one token takes to refill.
local function per_token(pm, period)
  return period * 1000000000000 / pm
end

-- until_us is the time until the bucket gains want tokens at this rate.
local function until_us(want, pm, period)
  if want <= 0 then return 0 end
  return us(want * period * 1000000000000 / pm)
end

-- kept is what a request must leave in a bucket of capacity whose reserve
-- field is r (docs/protocol.md, "Reserve"): the reserve, a whole number
-- below the capacity (anything else is none), or nothing for a critical
-- request. A request of more than capacity - kept can never be granted.
local function kept(r, capacity, critical)
  if critical or not r then return 0 end
  r = tonumber(r)
  if not r or r < 1 or r >= capacity or r ~= math.floor(r) then return 0 end
  return r
end

-- above is the whole tokens a request that must leave r of them can take
-- from a bucket holding tokens, never below 0: the remaining of its answer.
local function above(tokens, r)
  local rem = math.floor(tokens - r)
  if rem < 0 then rem = 0 end
  return rem
end

-- take answers a request of n tokens from a bucket holding tokens that must
-- keep r of them (kept): the tokens left (nil when nothing is taken) and the
-- answer {code, remaining, retry_us, reset_us, capacity, permits_micro,
-- period}, followed by x8, x9 and x10 when given (a nil ends the answer).
-- Granted when tokens - r >= n. Otherwise nothing is taken and the code is
-- 0 denied, or 2 would deny for a bucket in shadow mode; retry_us is the
-- wait until the bucket holds r + n, from its actual count: a bucket in
-- debt waits for the debt and then r + n (docs/protocol.md, "Debt").
-- remaining is what the request could still take, never below 0. The
-- answer is built in one constructor: a table that grows after it is
-- built is rehashed, which costs more than the arithmetic.
local function take(tokens, n, capacity, pm, period, shadow, r, x8, x9, x10)
  if tokens - r >= n then
    local left = tokens - n
    return left, {1, math.floor(left - r), 0, until_us(capacity - left, pm, period), capacity, pm, period, x8, x9,
      x10}
  end
  local code = 0
  if shadow then code = 2 end
  return nil, {code, above(tokens, r), until_us(n + r - tokens, pm, period), until_us(capacity - tokens, pm, period),
    capacity, pm, period, x8, x9, x10}
end
-- The packed limit (docs/protocol.md, "The packed limit"). The apply
-- script writes a bucket's limit a second time, in the field cfg, as eight
-- little-endian doubles: kind (0 token bucket, 1 quota, 2 concurrency),
-- capacity, permits in millionths, period, lease_ms, shadow (0 or 1),
-- reserve and slot_ms. The acquire reads it with the state in one HMGET
-- of four fields and one struct.unpack, where the fields cost seven more
-- lookups in the hash and their parsing. A hash without it (written by an
-- older worker, or on a server without the struct library) is read field
-- by field, with the same answers.
local PACKED, PACKED_LEN = '<dddddddd', 64

-- packed returns the packed limit of kind k ('bucket', 'quota' or
-- 'concurrency'), capacity c, permits p (a decimal), period d, lease_ms,
-- shadow ('0' or '1'), reserve r and slot_ms, or nil on a server without
-- the struct library.
local function packed(k, c, p, d, lease, shadow, r, slot_ms)
  local st = rawget(_G, 'struct')
  if not st then return nil end
  local code = 0
  if k == 'quota' then
    code = 1
  elseif k == 'concurrency' then
    code = 2
  end
  return st.pack(PACKED, code, tonumber(c), math.floor(tonumber(p) * 1000000 + 0.5), tonumber(d), tonumber(lease),
    tonumber(shadow), tonumber(r), tonumber(slot_ms))
end

-- unpacked returns the packed limit s as kind, capacity, permits in
-- millionths, period, lease_ms, shadow, reserve and slot_ms, or nil when s
-- is no packed limit that holds: a known kind, a whole capacity of at
-- least 1, and for a token bucket a rate.
local function unpacked(s)
  if type(s) ~= 'string' or #s ~= PACKED_LEN then return nil end
  local k, c, pm, d, lease, shadow, r, ms = struct.unpack(PACKED, s)
  if c < 1 or c % 1 ~= 0 or (k ~= 0 and k ~= 1 and k ~= 2) or (k == 0 and (pm <= 0 or d < 1)) then return nil end
  return k, c, pm, d, lease, shadow, r, ms
end

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

-- Sluice slot: take, release or renew a slot of a shared concurrency limit
-- for app ARGV[1] (docs/protocol.md, "Concurrency limits"). ARGV[2] is the
-- op ('take', 'release' or 'renew'), ARGV[3] the slot id. KEYS[1] is the
-- limit's hash, KEYS[2] its slot set: KEYS[1] followed by ':slots'. The
-- answer is seven integers: {code, in_use, limit, retry_us, slot_ms,
-- source, shadow} (source is always 0, the limit's own).
local app, op, id = ARGV[1], ARGV[2], ARGV[3]
if (op ~= 'take' and op ~= 'release' and op ~= 'renew') or not slot_id_ok(id) then
  return {-4, 0, 0, 0, 0, 0, 0}
end
if KEYS[2] ~= KEYS[1] .. ':slots' then return {-5, 0, 0, 0, 0, 0, 0} end
-- The packed limit and the apps in one HMGET; without a packed limit, the
-- fields, where a concurrency limit's rate fields are not read: only
-- another kind's (rarely sent here) needs them, to tell a token bucket
-- from no limit.
local f = redis.call('HMGET', KEYS[1], 'cfg', 'apps')
local kind, limit, _, _, _, sh, _, ms = unpacked(f[1])
local shadow = sh == 1
if kind == 2 then
  ms = slot_ms_of('concurrency', ms)
elseif kind then
  ms = nil
else
  local g = redis.call('HMGET', KEYS[1], 'capacity', 'shadow', 'kind', 'slot_ms')
  local p = {}
  if g[3] ~= 'concurrency' then p = redis.call('HMGET', KEYS[1], 'permits', 'period') end
  limit = kind_limit(g[3], g[1], p[1], p[2])
  if not limit then return {-1, 0, 0, 0, 0, 0, 0} end
  ms, shadow = slot_ms_of(g[3], g[4]), g[2] == '1'
end
if not app_ok(app, f[2]) then return {-2, 0, limit, 0, ms or 0, 0, 0} end
-- A limit of another kind (a token bucket, a quota) has no slots.
if not ms then return {-6, 0, limit, 0, 0, 0, 0} end
return slot_op(op, KEYS[2], id, now_us(), limit, ms, shadow, 0)
