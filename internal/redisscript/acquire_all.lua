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

-- The quota part of the core (docs/protocol.md, "Quotas"): a quota counts
-- what it granted in each calendar period and grants at most its quota per
-- period. Lua has no time zones: the periods are the instants of the
-- table `bounds` (Unix seconds, 10 digits each, ascending) that the sync
-- worker computes and writes, and the script only finds Redis's TIME in
-- it. A count is kept with the start of its period, so that a count of
-- another period reads as 0: the reset is exact.

-- kind_limit checks a stored limit of kind k (absent: a token bucket) and
-- returns capacity, permits in millionths and period, or nil: a token
-- bucket's as limit_of reads it; a quota's (or another kind's that counts
-- rather than refills) is its capacity, the quota, with permits and
-- period 0.
local function kind_limit(k, c, p, d)
  if not k or k == 'bucket' then return limit_of(c, p, d) end
  local q = tonumber(c)
  if not q or q < 1 or q % 1 ~= 0 then return nil end
  return q, 0, 0
end

-- period_of finds the period of the table b containing now (µs): its
-- start and end in Unix seconds, or nil when b is no table or does not
-- cover now. Entries are 10 characters each, so any one is read without
-- splitting the table, and a bisection reads a handful.
local function period_of(b, now)
  if type(b) ~= 'string' or #b < 20 or #b % 10 ~= 0 then return nil end
  local lo, hi = tonumber(string.sub(b, 1, 10)), tonumber(string.sub(b, -10))
  if not lo or not hi or now < lo * 1000000 or now >= hi * 1000000 then return nil end
  local i, j = 1, #b / 10
  while j - i > 1 do
    local m = math.floor((i + j) / 2)
    local v = tonumber(string.sub(b, m * 10 - 9, m * 10))
    if not v then return nil end
    if v * 1000000 <= now then
      i, lo = m, v
    else
      j, hi = m, v
    end
  end
  return lo, hi
end

-- counted returns the period [s, e) of a quota's stored count used and
-- that count, when its stored period (start ps, end pe, Unix seconds)
-- holds now (µs), else nil: the acquire then finds the period in the
-- table. The apply script forgets pe (writes 0) whenever the table may
-- have changed, so a stored period is always one of the table's.
local function counted(used, ps, pe, now)
  ps, pe = tonumber(ps), tonumber(pe)
  if not ps or not pe or now < ps * 1000000 or now >= pe * 1000000 then return nil end
  return ps, pe, tonumber(used) or 0
end

-- quota_take answers a request of n (1 <= n <= q) from a quota of q that
-- counted used in the period [s, e) at now: the new count (nil when
-- nothing is counted) and the answer of seven integers (then x8, x9, x10):
-- code, the whole requests left this period, the wait (a denial: until
-- the period ends, when n fits again), the time until the count resets,
-- q, 0 (a quota has no rate) and the period's length in seconds. The
-- code is 1 allowed when used + n <= q, else 0 denied, or 2 would deny in
-- shadow mode.
local function quota_take(q, used, n, s, e, now, shadow, x8, x9, x10)
  local reset = us(e * 1000000 - now)
  if used + n <= q then
    used = used + n
    return used, {1, q - used, 0, reset, q, 0, e - s, x8, x9, x10}
  end
  local code = 0
  if shadow then code = 2 end
  local rem = q - used
  if rem < 0 then rem = 0 end
  return nil, {code, rem, reset, reset, q, 0, e - s, x8, x9, x10}
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
-- The state of a token bucket (docs/protocol.md, "The bucket state"): its
-- tokens and the time of their last refill (ts, microseconds of Redis
-- TIME). A hash keeps it in one of two forms, and every script writes it
-- back in the form it found:
--   binary: the field st, two little-endian doubles (tokens, then ts):
--           one field to find and to write, nothing to parse or print;
--   decimal: the fields tokens ('%.17g') and ts ('%d'), which clients of
--           releases before the binary form read and write.
-- Only the apply script picks the form (the sync worker's state format)
-- and moves a bucket from one to the other. A server without the struct
-- library keeps the decimal form.
local STATE, STATE_LEN = '<dd', 16

-- stored returns the tokens and ts of a hash whose fields st, tokens and
-- ts hold st, tokens and ts, and whether they are in the binary form: the
-- binary form's when st holds one, else the decimal fields (refill reads
-- them; absent is a full bucket).
local function stored(st, tokens, ts)
  if type(st) == 'string' and #st == STATE_LEN then
    local t, s = struct.unpack(STATE, st)
    return t, s, true
  end
  return tokens, ts, false
end

-- state_of is stored for the hash key whose field st read st, reading the
-- decimal fields only when st holds no binary state: the acquire asks for
-- st alone, the common case.
local function state_of(key, st)
  local t, s, binary = stored(st)
  if binary then return t, s, true end
  local d = redis.call('HMGET', key, 'tokens', 'ts')
  return d[1], d[2], false
end

-- decimal prints a count of tokens: a whole count prints the same with
-- '%d' as with '%.17g', and faster.
local function decimal(tokens)
  if math.floor(tokens) == tokens then return string.format('%d', tokens) end
  return string.format('%.17g', tokens)
end

-- state_fields appends to the command c the fields and values of a state
-- of tokens at ts, in the binary form or the decimal one.
local function state_fields(c, tokens, ts, binary)
  if binary then
    c[#c + 1], c[#c + 2] = 'st', struct.pack(STATE, tokens, ts)
  else
    c[#c + 1], c[#c + 2], c[#c + 3], c[#c + 4] = 'tokens', decimal(tokens), 'ts', string.format('%d', ts)
  end
  return c
end

-- put writes a bucket's tokens and ts in the form binary says.
local function put(key, tokens, ts, binary)
  if binary then
    redis.call('HSET', key, 'st', struct.pack(STATE, tokens, ts))
  else
    redis.call('HSET', key, 'tokens', decimal(tokens), 'ts', string.format('%d', ts))
  end
end

-- Sluice acquire-all: take tokens from several buckets for app ARGV[1] in
-- one atomic call: either every entry is granted, or nothing is written.
-- ARGV[2] is the number of entries m (1..32); entry i is the three
-- arguments ARGV[3i], ARGV[3i+1], ARGV[3i+2] = kind, key, n. Entries take
-- their KEYS in order: kind "b" is a plain bucket, one KEYS element (the
-- bucket hash), and its key argument must be empty; kind "k" is a key of a
-- keyed bucket, two KEYS elements (the key group's hash and the key's
-- state, as for the keyed acquire script), and its key argument is the
-- caller's key. The answer is {overall, then seven integers per entry in
-- the acquire script's layout}; a malformed call as a whole answers the
-- one-element array {-4} (docs/protocol.md). A bucket (or an override) in
-- shadow mode never refuses: an entry it would deny answers 2 and takes
-- nothing. A quota (kind 'quota', lua/quota.lua) is an entry like a
-- bucket, counted in its period. ARGV[3m+3] = '1' marks the call critical:
-- its entries may take the reserves of their buckets, which every other
-- call must leave (a quota has none).
local MAX_ENTRIES = 32
local INVALID = {-4, 0, 0, 0, 0, 0, 0}

local m = count(ARGV[2])
if not m or m < 1 or m > MAX_ENTRIES or (#ARGV ~= 2 + 3 * m and #ARGV ~= 3 + 3 * m) then
  return {-4}
end
-- Entry i's first key is KEYS[first[i]].
local first = {}
local nkeys = 0
for i = 1, m do
  first[i] = nkeys + 1
  if ARGV[3 * i] == 'k' then nkeys = nkeys + 2 else nkeys = nkeys + 1 end
end
if #KEYS ~= nkeys then
  return {-4}
end
local app = ARGV[1]
local critical = ARGV[3 + 3 * m] == '1'
local now = now_us()

-- One state per distinct key (a bucket hash, or a key's state), so that an
-- entry naming a bucket or key twice sees what the earlier entry took.
local state = {}
local order = {}
local answers = {}
local overall = 1
local function worse(code)
  -- An error (negative) beats a denial, which beats a grant (a would-deny
  -- of a shadow bucket counts as a grant); among errors the first wins.
  if code == 2 then code = 1 end
  if overall >= 0 and (code < 0 or code < overall) then overall = code end
end

-- plain answers an entry of n tokens from the bucket hash key.
local function plain(key, n)
  local s = state[key]
  if not s then
    local f = redis.call('HMGET', key, 'capacity', 'permits', 'period', 'apps', 'tokens', 'ts', 'shadow', 'kind',
      'reserve', 'st')
    s = {want = 0, r = 0}
    if not f[8] or f[8] == 'bucket' or f[8] == 'quota' then
      s.capacity, s.pm, s.period = kind_limit(f[8], f[1], f[2], f[3])
    end
    if not s.capacity then
      s.fail = {-1, 0, 0, 0, 0, 0, 0}
    elseif not app_ok(app, f[4]) then
      s.fail = {-2, 0, 0, 0, s.capacity, s.pm, s.period}
    elseif f[8] == 'quota' then
      -- A quota: its count of the period containing now (lua/quota.lua).
      local q = redis.call('HMGET', key, 'bounds', 'used', 'pstart')
      s.ps, s.pe = period_of(q[1], now)
      if not s.ps then
        s.fail = {-1, 0, 0, 0, 0, 0, 0}
      else
        s.used = 0
        if tonumber(q[3]) == s.ps then s.used = tonumber(q[2]) or 0 end
      end
      s.shadow = f[7] == '1'
    else
      s.tokens, s.ts, s.binary = stored(f[10], f[5], f[6])
      s.tokens, s.ts = refill(s.tokens, s.ts, now, s.capacity, s.pm, s.period)
      s.shadow = f[7] == '1'
      s.r = kept(f[9], s.capacity, critical)
    end
    state[key] = s
    order[#order + 1] = key
  end
  if s.fail then return s.fail end
  -- Alone or together with the earlier entries of this bucket, more than
  -- the bucket ever gives this call.
  if s.want + n > s.capacity - s.r then return {-3, 0, 0, 0, s.capacity, s.pm, s.period} end
  s.want = s.want + n
  if s.ps then
    local used, a = quota_take(s.capacity, s.used, n, s.ps, s.pe, now, s.shadow)
    if used then s.used = used end
    return a
  end
  local left, a = take(s.tokens, n, s.capacity, s.pm, s.period, s.shadow, s.r)
  if left then s.tokens = left end
  return a
end

-- keyed answers an entry of n tokens for key, whose group hash is base and
-- whose state is skey, with the keyed acquire script's rules (its eighth
-- field, the source of the limit, is left out).
local function keyed(base, skey, key, n)
  if key_refusal(base, skey, key) then return {-5, 0, 0, 0, 0, 0, 0} end
  local s = state[skey]
  if not s then
    s = {keyed = true, want = 0}
    state[skey] = s
    order[#order + 1] = skey
    local f = group_read(base, key)
    local code, src, res
    code, s.capacity, s.pm, s.period, s.shadow, src, res = key_limit(base, key, app, f, f[EXACT])
    s.r = res or 0
    if critical then s.r = 0 end
    if code == 0 and f[8] and f[8] ~= 'bucket' and f[8] ~= 'quota' then code = -1 end
    if code == 0 and f[8] == 'quota' then
      s.ps, s.pe = period_of(f[9], now)
      if not s.ps then code = -1 end
    end
    if code == -1 then
      s.fail = {-1, 0, 0, 0, 0, 0, 0}
    elseif code ~= 0 then
      s.fail = {code, 0, 0, 0, s.capacity, s.pm, s.period}
    elseif s.ps then
      s.id = f[5]
      s.used = quota_used(redis.call('MGET', skey)[1], s.id, s.ps)
    else
      s.id = f[5]
      s.full_at = key_full_at(redis.call('MGET', skey)[1], s.id, now, s.capacity, s.pm, s.period)
    end
  end
  if s.fail then return s.fail end
  if s.want + n > s.capacity - s.r then return {-3, 0, 0, 0, s.capacity, s.pm, s.period} end
  s.want = s.want + n
  if s.ps then
    local used, a = quota_take(s.capacity, s.used, n, s.ps, s.pe, now, s.shadow)
    if used then
      s.used = used
      s.took = true
    end
    return a
  end
  local full_at, a = key_take(s.full_at, n, now, s.capacity, s.pm, s.period, s.shadow, s.r)
  if full_at then
    s.full_at = full_at
    s.took = true
  end
  return a
end

for i = 1, m do
  local kind, ekey, n = ARGV[3 * i], ARGV[3 * i + 1], count(ARGV[3 * i + 2])
  local ans
  if not n or n < 1 then
    ans = INVALID
  elseif kind == 'b' and ekey == '' then
    ans = plain(KEYS[first[i]], n)
  elseif kind == 'k' then
    ans = keyed(KEYS[first[i]], KEYS[first[i] + 1], ekey, n)
  else
    ans = INVALID
  end
  worse(ans[1])
  answers[i] = ans
end

if overall == 1 then
  for _, key in ipairs(order) do
    local s = state[key]
    if s.fail then
    elseif not s.keyed and s.ps then
      if s.want > 0 then
        redis.call('HSET', key, 'used', string.format('%d', s.used), 'pstart', string.format('%d', s.ps))
      end
    elseif not s.keyed then
      put(key, s.tokens, s.ts, s.binary)
    elseif s.took and s.ps then
      quota_put(key, s.id, s.ps, s.pe, s.used, now)
    elseif s.took then
      key_put(key, s.id, s.full_at, now)
    end
  end
end
local out = {overall}
for i = 1, m do
  for j = 1, 7 do out[#out + 1] = answers[i][j] end
end
return out
