
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
