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

-- The keyed part of the core: the key and override rules (docs/protocol.md,
-- "Keyed buckets"), shared by the keyed acquire and acquire-all scripts.
local MAX_KEY = 256

-- Base64url: B64V maps the bytes of its digits (A-Z, a-z, 0-9, '-', '_')
-- to their values, B64B the values to the bytes. Written out, since a
-- function library's chunk may not call the string library while it
-- loads; a lookup costs a fraction of a search or a chain of comparisons.
local B64V = {[65] = 0, [66] = 1, [67] = 2, [68] = 3, [69] = 4, [70] = 5, [71] = 6, [72] = 7, [73] = 8,
  [74] = 9, [75] = 10, [76] = 11, [77] = 12, [78] = 13, [79] = 14, [80] = 15, [81] = 16, [82] = 17, [83] = 18,
  [84] = 19, [85] = 20, [86] = 21, [87] = 22, [88] = 23, [89] = 24, [90] = 25, [97] = 26, [98] = 27, [99] = 28,
  [100] = 29, [101] = 30, [102] = 31, [103] = 32, [104] = 33, [105] = 34, [106] = 35, [107] = 36, [108] = 37,
  [109] = 38, [110] = 39, [111] = 40, [112] = 41, [113] = 42, [114] = 43, [115] = 44, [116] = 45, [117] = 46,
  [118] = 47, [119] = 48, [120] = 49, [121] = 50, [122] = 51, [48] = 52, [49] = 53, [50] = 54, [51] = 55,
  [52] = 56, [53] = 57, [54] = 58, [55] = 59, [56] = 60, [57] = 61, [45] = 62, [95] = 63}
local B64B = {[0] = 65, [1] = 66, [2] = 67, [3] = 68, [4] = 69, [5] = 70, [6] = 71, [7] = 72, [8] = 73,
  [9] = 74, [10] = 75, [11] = 76, [12] = 77, [13] = 78, [14] = 79, [15] = 80, [16] = 81, [17] = 82, [18] = 83,
  [19] = 84, [20] = 85, [21] = 86, [22] = 87, [23] = 88, [24] = 89, [25] = 90, [26] = 97, [27] = 98, [28] = 99,
  [29] = 100, [30] = 101, [31] = 102, [32] = 103, [33] = 104, [34] = 105, [35] = 106, [36] = 107, [37] = 108,
  [38] = 109, [39] = 110, [40] = 111, [41] = 112, [42] = 113, [43] = 114, [44] = 115, [45] = 116, [46] = 117,
  [47] = 118, [48] = 119, [49] = 120, [50] = 121, [51] = 122, [52] = 48, [53] = 49, [54] = 50, [55] = 51,
  [56] = 52, [57] = 53, [58] = 54, [59] = 55, [60] = 56, [61] = 57, [62] = 45, [63] = 95}

-- key_refusal answers a key and state pair that cannot be served: nil when
-- they are fine, else the code invalid key (-5). The state must be one of
-- this group's: the prefix of the group key (what comes before 'k{'), a
-- 3-character hash tag in braces, the group as one base64url character
-- and 11 base64url characters. Which tag and id a key has is the caller's
-- computation: checking them here (CRC16, SHA-1) costs a quarter of the
-- call; on Redis Cluster a wrong tag fails as a cross-slot call.
local function key_refusal(base, state, key)
  if type(key) ~= 'string' or #key < 1 or #key > MAX_KEY then return -5 end
  if type(base) ~= 'string' or type(state) ~= 'string' then return -5 end
  local p, g = string.match(base, '()k{[^{}]*:(%d+)}$')
  if not p then return -5 end
  g = tonumber(g)
  if g >= 64 or #state ~= p + 16 or string.byte(state, p + 5) ~= B64B[g]
      or string.sub(state, 1, p - 1) ~= string.sub(base, 1, p - 1)
      or not string.find(state, '^{[%w_-][%w_-][%w_-]}[%w_-]+$', p) then
    return -5
  end
  return nil
end

-- The fields of a group hash every keyed decision reads, in this order;
-- the key's exact override 'e:<key>' follows them.
-- kind and bounds are a quota's (lua/quota.lua); reserve a token bucket's.
local GROUP_FIELDS = {'capacity', 'permits', 'period', 'apps', 'id', 'lens', 'shadow', 'kind', 'bounds', 'reserve'}
-- EXACT is the place of the exact override among the fields read.
local EXACT = #GROUP_FIELDS + 1

-- group_read reads one key's group hash base in one HMGET: the
-- GROUP_FIELDS, the key's exact override (at EXACT), then the field extra
-- when given.
local function group_read(base, key, extra)
  local names = {unpack(GROUP_FIELDS)}
  names[EXACT], names[EXACT + 1] = 'e:' .. key, extra
  return redis.call('HMGET', base, unpack(names))
end

-- override parses an override value "<id> <version> <capacity> <permits>
-- <period>", followed by " s" in shadow mode, into its limit (capacity,
-- permits in millionths, period, shadow) for a bucket of kind k (a
-- concurrency limit's or a quota's override has permits and period 0,
-- see kind_limit); a tombstone, or anything else, is nil.
local function override(v, k)
  if not v then return nil end
  local c, p, d, s = string.match(v, '^%d+ %d+ (%d+) ([%d.]+) (%d+)( ?s?)$')
  if not c or (s ~= '' and s ~= ' s') then return nil end
  local capacity, pm, period = kind_limit(k, c, p, d)
  if not capacity then return nil end
  return capacity, pm, period, s == ' s'
end

-- share is an override's reserve: floor(r * c / capacity), the bucket's
-- share r / capacity of the override's capacity c, rounded down, exactly.
-- r * c may pass 2^53, where doubles stop being exact, so it is taken in
-- two parts of c (each product below 2^47); a quotient a double rounded up
-- to the next whole number is taken back.
local function share(r, c, capacity)
  local hi, lo = math.floor(c / 65536), c % 65536
  local a = r * hi
  local q1 = math.floor(a / capacity)
  local m = a - q1 * capacity
  if m < 0 then q1, m = q1 - 1, m + capacity end
  local b = m * 65536 + r * lo
  local q2 = math.floor(b / capacity)
  if b - q2 * capacity < 0 then q2 = q2 - 1 end
  return q1 * 65536 + q2
end

-- key_limit decides the limit of key in the group hash base whose fields
-- f are GROUP_FIELDS (f[8] the kind, see kind_limit) and whose exact
-- override is exact: it returns a
-- refusal code (-1 unknown bucket, -2 app not allowed, with the bucket's
-- limit) or 0, then capacity, permits in millionths, period, shadow, the
-- source (0 the bucket's limit, 1 the exact override, 2 the longest
-- matching prefix override; lens lists the prefix lengths, longest first)
-- and the reserve: the bucket's, or for an override the bucket's share of
-- its capacity (share). Shadow mode: the bucket's covers every key, an
-- override's its keys.
local function key_limit(base, key, app, f, exact)
  local capacity, pm, period = kind_limit(f[8], f[1], f[2], f[3])
  if not capacity or not f[5] then return -1, 0, 0, 0 end
  if not app_ok(app, f[4]) then return -2, capacity, pm, period end
  local shadow = f[7] == '1'
  -- Only a token bucket keeps a reserve.
  local r = 0
  if not f[8] or f[8] == 'bucket' then r = kept(f[10], capacity, false) end
  local oc, opm, od, osh = override(exact, f[8])
  local src = 1
  if not oc and f[6] and f[6] ~= '' then
    local fields = {}
    for l in string.gmatch(f[6], '%d+') do
      local len = tonumber(l)
      if len <= #key then fields[#fields + 1] = 'p:' .. string.sub(key, 1, len) end
    end
    if #fields > 0 then
      local vals = redis.call('HMGET', base, unpack(fields))
      for j = 1, #fields do
        oc, opm, od, osh = override(vals[j], f[8])
        if oc then break end
      end
    end
    src = 2
  end
  if not oc then return 0, capacity, pm, period, shadow, 0, r end
  if r > 0 then r = share(r, oc, capacity) end
  return 0, oc, opm, od, shadow or osh, src, r
end

-- b64digits writes x's base64url digits in front of the bytes given, the
-- digits found so far (a tail call, without a table).
local function b64digits(x, ...)
  if x < 1 then return string.char(...) end
  local d = x % 64
  return b64digits((x - d) / 64, B64B[d], ...)
end

-- b64num writes a whole number x >= 0 in base64url digits, most
-- significant first. Division by 64 is exact for a double, so any whole
-- double is written exactly, at any size.
local function b64num(x)
  if x < 1 then return 'A' end
  return b64digits(x)
end

-- b64val reads what b64num wrote; nil for any other character.
local function b64val(s)
  local x = 0
  for i = 1, #s do
    local d = B64V[string.byte(s, i)]
    if not d then return nil end
    x = x * 64 + d
  end
  return x
end

-- key_full_at reads a key's state "<id> <full_at x 4>", both in b64num's
-- base 64: the bucket id and the time in quarter microseconds at which the
-- key's bucket is full again (a double of Redis's clock is a multiple of a
-- quarter microsecond, so this is exact; 11 or 12 bytes for ids below
-- 4,096, which Redis keeps in its smallest string object). A missing
-- state, another incarnation's (id) or a full_at in the past is a full
-- bucket (now); a key can owe no more than it holds (now + a full bucket).
local function key_full_at(sv, id, now, capacity, pm, period)
  local full_at = now
  if sv then
    local sid, sfa = string.match(sv, '^([%w_-]+) ([%w_-]+)$')
    if sid and b64val(sid) == tonumber(id) then
      local fa = b64val(sfa)
      if fa then full_at = fa / 4 end
    end
  end
  local full = capacity * per_token(pm, period)
  if full_at > now + full then full_at = now + full end
  if full_at < now then full_at = now end
  return full_at
end

-- key_take answers a request of n tokens of a key whose bucket is full at
-- full_at and must keep r tokens (kept): the new full_at (nil when nothing
-- is taken) and the seven integers of take. A billionth of a token is the
-- tolerance for the rounding of full_at (a double).
local function key_take(full_at, n, now, capacity, pm, period, shadow, r)
  local per = per_token(pm, period)
  local tokens = capacity - (full_at - now) / per
  if tokens < 0 then tokens = 0 end
  if tokens - r + 0.000000001 >= n then
    full_at = full_at + n * per
    tokens = tokens - n
    if tokens < 0 then tokens = 0 end
    return full_at, {1, above(tokens, r), 0, us(full_at - now), capacity, pm, period}
  end
  local code = 0
  if shadow then code = 2 end
  return nil, {code, above(tokens, r), us((n + r - tokens) * per), us(full_at - now), capacity, pm, period}
end

-- state_ttl is the expiry in milliseconds of a state written now that is
-- of use up to upto (µs): at least 1 ms, plus a spread, capped like every
-- duration ('%d' of a larger double is undefined). Keys written together
-- with the same wait must not all expire in the same second, which stalls
-- Redis. The spread is the last two characters of the state name
-- (base64url of a hash: 10 bits, h = 0..1023) scaled to at most the wait
-- itself and at most a minute; a state outliving its use reads as unused
-- (a full bucket, a count of a period gone), so the spread changes no
-- answer.
local SPREAD_MS = 60000
local function state_ttl(state, upto, now)
  local ttl = math.ceil((upto - now) / 1000)
  if ttl < 1 then ttl = 1 end
  local h = 16 * B64V[string.byte(state, -2)] + B64V[string.byte(state, -1)] / 4
  local w = ttl
  if w > SPREAD_MS then w = SPREAD_MS end
  ttl = ttl + math.floor(h * w / 1024)
  if ttl > MAX_US / 1000 then ttl = MAX_US / 1000 end
  return string.format('%d', ttl)
end

-- key_put writes a key's state; it expires when the key's bucket is full
-- again, plus a spread (state_ttl).
local function key_put(state, id, full_at, now)
  local v = b64num(tonumber(id)) .. ' ' .. b64num(math.ceil(full_at * 4))
  redis.call('SET', state, v, 'PX', state_ttl(state, full_at, now))
  return v
end

-- quota_used reads a key's count in the period starting at s (Unix
-- seconds) from its state "<id> <s> <used>" (b64num): a missing state,
-- another incarnation's (id) or another period's is 0.
local function quota_used(sv, id, s)
  if not sv then return 0 end
  local sid, ss, su = string.match(sv, '^([%w_-]+) ([%w_-]+) ([%w_-]+)$')
  if sid and b64val(sid) == tonumber(id) and b64val(ss) == s then return b64val(su) or 0 end
  return 0
end

-- quota_put writes a key's count used in the period [s, e); the state
-- expires when the period ends, plus a spread (state_ttl).
local function quota_put(state, id, s, e, used, now)
  local v = b64num(tonumber(id)) .. ' ' .. b64num(s) .. ' ' .. b64num(used)
  redis.call('SET', state, v, 'PX', state_ttl(state, e * 1000000, now))
  return v
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

-- Sluice keyed slot: take, release or renew a slot of one key of a keyed
-- concurrency limit for app ARGV[1] (docs/protocol.md, "Concurrency
-- limits"). ARGV[2] is the op ('take', 'release' or 'renew'), ARGV[3] the
-- slot id, ARGV[4] the key. KEYS[1] is the key's group hash, KEYS[2] the
-- key's slot set: its state key followed by ':slots'. The limit is the
-- key's: its exact override, else its longest prefix override, else the
-- limit's own. The answer is seven integers: {code, in_use, limit,
-- retry_us, slot_ms, source, shadow}.
local app, op, id, key = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if (op ~= 'take' and op ~= 'release' and op ~= 'renew') or not slot_id_ok(id) then
  return {-4, 0, 0, 0, 0, 0, 0}
end
local base, set = KEYS[1], KEYS[2]
if type(set) ~= 'string' or string.sub(set, -6) ~= ':slots' or key_refusal(base, string.sub(set, 1, -7), key) then
  return {-5, 0, 0, 0, 0, 0, 0}
end
local f = group_read(base, key, 'slot_ms')
local code, limit, _pm, _period, shadow, src = key_limit(base, key, app, f, f[EXACT])
if code == -1 then return {-1, 0, 0, 0, 0, 0, 0} end
local ms = slot_ms_of(f[8], f[EXACT + 1])
if code ~= 0 then return {code, 0, limit, 0, ms or 0, 0, 0} end
-- A limit of another kind (a token bucket, a quota) has no slots.
if not ms then return {-6, 0, limit, 0, 0, 0, 0} end
return slot_op(op, set, id, now_us(), limit, ms, shadow, src)
