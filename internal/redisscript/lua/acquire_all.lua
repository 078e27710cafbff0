
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
