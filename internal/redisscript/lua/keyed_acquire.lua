
-- Sluice keyed acquire: take ARGV[2] tokens for app ARGV[1] from the state
-- of key ARGV[3] in a keyed bucket. KEYS[1] is the hash of the key's group
-- (the bucket's config and its overrides), KEYS[2] the key's state; both
-- are in the group's Cluster slot. The answer is the plain acquire's seven
-- integers and an eighth, the source of the limit (0 the bucket's, 1 an
-- exact override, 2 a prefix override); code -5 is an invalid key
-- (docs/protocol.md). Shadow mode: where the bucket or the override that
-- applies is in shadow mode, a call that would be denied answers code 2
-- (would deny) and takes nothing. A client that passes one more argument
-- '2' after the last key (protocol 2) gets a ninth integer in every
-- answer: shadow, 1 when the limit that applied is in shadow mode, else 0
-- (0 for codes -1, -2, -4, -5), so that its local fallback learns it from
-- a grant too; '3' (protocol 3) adds a tenth, the reserve of that limit. An
-- argument after the protocol marks critical acquires: its i-th character
-- '1' makes the i-th acquire critical (it may take the reserve, which every
-- other acquire must leave).
--
-- Several acquires of one app in one call: KEYS holds a pair (group hash,
-- state) per acquire, ARGV the app and then n and the key of each (then
-- the protocol and the critical flags); the answer is their answers of
-- eight (nine, ten) integers one after the other. Each is decided as if
-- it ran alone, in order; they share one reading of TIME and one MGET of
-- their states, which is what makes the call cheaper than separate ones.
--
-- A key's state is one string "<id> <full_at x 4>" (base 64, see
-- key_full_at): the bucket id (a recreated bucket ignores the state of the
-- old one) and the time at which the key's bucket is full again. The key
-- expires then, so an idle key costs nothing and a missing key is a full
-- bucket.
local app = ARGV[1]
local count_ = math.floor(#KEYS / 2)
if count_ < 1 then
  return {-5, 0, 0, 0, 0, 0, 0, 0}
end
-- The integers of each answer: 8, or 9 (with shadow) under protocol 2, 10
-- (and the reserve) under protocol 3.
local width, flags = 8, ''
if #ARGV == 2 * count_ + 2 or #ARGV == 2 * count_ + 3 then
  local proto = ARGV[2 * count_ + 2]
  if proto == '2' then width = 9 elseif proto == '3' then width = 10 end
  flags = ARGV[2 * count_ + 3] or ''
end

-- decide answers one acquire of n tokens for key, whose state string is s
-- (false when absent), at time now, and writes the state when it grants.
-- It returns the answer's first seven integers, the source, shadow (0 or
-- 1) and the reserve of the limit, and the state written, if any: the
-- answer is not grown by more fields, which would rehash it.
local function decide(base, state, n, key, s, now, f, exact, critical)
  -- A limit of another kind than a token bucket or a quota is not this
  -- script's to take from.
  if f[8] and f[8] ~= 'bucket' and f[8] ~= 'quota' then return {-1, 0, 0, 0, 0, 0, 0}, 0, 0, 0 end
  local code, capacity, pm, period, shadow, src, res = key_limit(base, key, app, f, exact)
  if code ~= 0 then return {code, 0, 0, 0, capacity, pm, period}, 0, 0, 0 end
  local sh = 0
  if shadow then sh = 1 end
  local r = res
  if critical then r = 0 end
  if n > capacity - r then return {-3, 0, 0, 0, capacity, pm, period}, src, sh, res end
  if f[8] == 'quota' then
    -- A keyed quota: the key's count of the period containing now (no
    -- reserve: key_limit answers 0 for a quota).
    local ps, pe = period_of(f[9], now)
    if not ps then return {-1, 0, 0, 0, 0, 0, 0}, 0, 0, 0 end
    local used, a = quota_take(capacity, quota_used(s, f[5], ps), n, ps, pe, now, shadow)
    if used then return a, src, sh, res, quota_put(state, f[5], ps, pe, used, now) end
    return a, src, sh, res
  end
  local full_at, a = key_take(key_full_at(s, f[5], now, capacity, pm, period), n, now, capacity, pm, period, shadow, r)
  if full_at then return a, src, sh, res, key_put(state, f[5], full_at, now) end
  return a, src, sh, res
end

-- answer is one acquire's answer a, source src, shadow sh and reserve res,
-- width integers long.
local function answer(a, src, sh, res)
  if width == 8 then return {a[1], a[2], a[3], a[4], a[5], a[6], a[7], src} end
  if width == 9 then return {a[1], a[2], a[3], a[4], a[5], a[6], a[7], src, sh} end
  return {a[1], a[2], a[3], a[4], a[5], a[6], a[7], src, sh, res}
end

-- One acquire, the common call, reads its state and its group directly:
-- the same reads as below, without the tables that gather several.
if count_ == 1 then
  local base, state, key = KEYS[1], KEYS[2], ARGV[3]
  local n = count(ARGV[2])
  if not n or n < 1 then return answer({-4, 0, 0, 0, 0, 0, 0}, 0, 0, 0) end
  if key_refusal(base, state, key) then return answer({-5, 0, 0, 0, 0, 0, 0}, 0, 0, 0) end
  local s = redis.call('GET', state)
  local f = group_read(base, key)
  local a, src, sh, res = decide(base, state, n, key, s, now_us(), f, f[EXACT], string.byte(flags, 1) == 49)
  return answer(a, src, sh, res)
end

-- Check every acquire, then read the states of those that passed in one
-- MGET, each group's fields (and the exact overrides of its keys) in one
-- HMGET, and the clock once. Acquires write only key states, so reading
-- the groups first reads what each acquire would read alone.
local ns, answers, states = {}, {}, {}
local groups, order = {}, {}
for i = 1, count_ do
  local base, key = KEYS[2 * i - 1], ARGV[2 * i + 1]
  local n = count(ARGV[2 * i])
  if not n or n < 1 then
    answers[i] = {-4, 0, 0, 0, 0, 0, 0}
  elseif key_refusal(base, KEYS[2 * i], key) then
    answers[i] = {-5, 0, 0, 0, 0, 0, 0}
  else
    ns[i] = n
    states[#states + 1] = KEYS[2 * i]
    local g = groups[base]
    if not g then
      g = {unpack(GROUP_FIELDS)}
      groups[base] = g
      order[#order + 1] = base
    end
    g[#g + 1] = 'e:' .. key
  end
end
local stored = {}
if #states > 0 then
  stored = redis.call('MGET', unpack(states))
end
local fields, next_exact = {}, {}
for _, base in ipairs(order) do
  fields[base] = redis.call('HMGET', base, unpack(groups[base]))
  next_exact[base] = EXACT
end
local now = now_us()

-- A state written by an earlier acquire of this call is the one a later
-- acquire of the same key reads.
local written = {}
local out = {}
local j = 0
for i = 1, count_ do
  local a = answers[i]
  local src, sh, res = 0, 0, 0
  if not a then
    j = j + 1
    local state = KEYS[2 * i]
    local s = written[state]
    if s == nil then s = stored[j] end
    local base = KEYS[2 * i - 1]
    local f = fields[base]
    local e = next_exact[base]
    next_exact[base] = e + 1
    local v
    a, src, sh, res, v = decide(base, state, ns[i], ARGV[2 * i + 1], s, now, f, f[e], string.byte(flags, i) == 49)
    if v then written[state] = v end
  end
  local o = #out
  for x = 1, 7 do
    out[o + x] = a[x]
  end
  out[o + 8] = src
  if width >= 9 then out[o + 9] = sh end
  if width == 10 then out[o + 10] = res end
end
return out
