-- Sluice acquire-all: take tokens from several buckets for app ARGV[1] in
-- one atomic call: either every entry is granted, or nothing is written.
-- ARGV[2] is the number of entries m (1..32); entry i is the three
-- arguments ARGV[3i], ARGV[3i+1], ARGV[3i+2] = kind, key, n. Entries take
-- their KEYS in order: kind "b" is a plain bucket, one KEYS element (the
-- bucket hash), and its key argument must be empty; kind "k" is a key of a
-- keyed bucket, two KEYS elements (the key group's hash and the key's
-- state, as for the keyed acquire script), and its key argument is the
-- caller's key. The answer is {overall, then seven integers per entry in
-- the acquire script's layout} (docs/protocol.md). A bucket (or an
-- override) in shadow mode never refuses: an entry it would deny answers 2
-- and takes nothing.
local MAX_N = 1000000000
local MAX_ENTRIES = 32
local MAX_KEY = 256
local MAX_US = 1000000000000000
local INVALID = {-4, 0, 0, 0, 0, 0, 0}

local m = ARGV[2]
if type(m) ~= 'string' or #m > 2 or not string.find(m, '^[1-9][0-9]*$') then
  return {-4}
end
m = tonumber(m)
if m > MAX_ENTRIES or #ARGV ~= 2 + 3 * m then
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
local app_ok = type(app) == 'string' and app ~= '' and not string.find(app, ',', 1, true)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

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

local function us(x)
  if x <= 0 then return 0 end
  x = math.ceil(x)
  if x > MAX_US then return MAX_US end
  return x
end

-- plain answers an entry of n tokens from the bucket hash key.
local function plain(key, n)
  local s = state[key]
  if not s then
    local f = redis.call('HMGET', key, 'capacity', 'permits', 'period', 'apps', 'tokens', 'ts', 'shadow')
    s = {capacity = tonumber(f[1]), permits = tonumber(f[2]), period = tonumber(f[3]), apps = f[4],
      want = 0, shadow = f[7] == '1'}
    if s.capacity and s.permits and s.period and s.capacity >= 1 and s.permits > 0 and s.period >= 1 then
      s.pm = math.floor(s.permits * 1000000 + 0.5)
      local tokens, ts = tonumber(f[5]), tonumber(f[6])
      if not tokens or not ts then tokens, ts = s.capacity, now end
      if now > ts then
        tokens = tokens + (now - ts) * s.pm / (s.period * 1000000000000)
        ts = now
      end
      if tokens > s.capacity then tokens = s.capacity end
      s.tokens, s.ts = tokens, ts
    end
    state[key] = s
    order[#order + 1] = key
  end
  local function until_us(want)
    if want <= 0 then return 0 end
    return us(want * s.period * 1000000000000 / s.pm)
  end
  if not s.pm then
    return {-1, 0, 0, 0, 0, 0, 0}
  elseif not app_ok or not s.apps or not string.find(s.apps, ',' .. app .. ',', 1, true) then
    return {-2, 0, 0, 0, s.capacity, s.pm, s.period}
  elseif s.want + n > s.capacity then
    -- Alone or together with the earlier entries of this bucket, more
    -- than the bucket ever holds.
    return {-3, 0, 0, 0, s.capacity, s.pm, s.period}
  end
  s.want = s.want + n
  local avail = s.tokens
  if avail < 0 then avail = 0 end -- in debt: nothing to take
  if avail >= n then
    s.tokens = s.tokens - n
    return {1, math.floor(s.tokens), 0, until_us(s.capacity - s.tokens), s.capacity, s.pm, s.period}
  end
  -- A bucket in shadow mode never refuses: it answers 2 (would deny),
  -- takes nothing, and does not hold back the set.
  local code = 0
  if s.shadow then code = 2 end
  return {code, math.floor(avail), until_us(n - s.tokens), until_us(s.capacity - s.tokens), s.capacity, s.pm,
    s.period}
end

-- An override is "<id> <version> <capacity> <permits> <period>", followed
-- by " s" when it is in shadow mode; a tombstone matches nothing.
local function limit(v)
  if not v then return nil end
  local c, p, d, sh = string.match(v, '^%d+ %d+ (%d+) ([%d.]+) (%d+)( ?s?)$')
  if not c or (sh ~= '' and sh ~= ' s') then return nil end
  return tonumber(c), tonumber(p), tonumber(d), sh == ' s'
end

-- keyed answers an entry of n tokens for key, whose group hash is base and
-- whose state is skey, with the keyed acquire script's rules (its eighth
-- field, the source of the limit, is left out).
local function keyed(base, skey, key, n)
  if type(key) ~= 'string' or #key < 1 or #key > MAX_KEY then
    return {-5, 0, 0, 0, 0, 0, 0}
  end
  if type(base) ~= 'string' or type(skey) ~= 'string' or string.byte(base, -1) ~= 125
      or #skey ~= #base + 16 or string.find(skey, base, 1, true) ~= 1
      or not string.find(skey, '^[0-9a-f]+$', #base + 1) then
    return {-5, 0, 0, 0, 0, 0, 0}
  end
  local s = state[skey]
  if not s then
    s = {keyed = true, want = 0}
    state[skey] = s
    order[#order + 1] = skey
    local f = redis.call('HMGET', base, 'capacity', 'permits', 'period', 'apps', 'id', 'lens', 'shadow', 'e:' .. key)
    local capacity, permits, period, id = tonumber(f[1]), tonumber(f[2]), tonumber(f[3]), f[5]
    if not capacity or not permits or not period or not id or capacity < 1 or permits <= 0 or period < 1 then
      s.fail = {-1, 0, 0, 0, 0, 0, 0}
    elseif not app_ok or not f[4] or not string.find(f[4], ',' .. app .. ',', 1, true) then
      s.fail = {-2, 0, 0, 0, capacity, math.floor(permits * 1000000 + 0.5), period}
    else
      -- The most specific override wins: the exact key, else the longest
      -- matching prefix (lens lists the prefix lengths, longest first).
      local oc, op, od, osh = limit(f[8])
      if not oc and f[6] and f[6] ~= '' then
        local fields = {}
        for l in string.gmatch(f[6], '%d+') do
          local len = tonumber(l)
          if len <= #key then fields[#fields + 1] = 'p:' .. string.sub(key, 1, len) end
        end
        if #fields > 0 then
          local vals = redis.call('HMGET', base, unpack(fields))
          for j = 1, #fields do
            oc, op, od, osh = limit(vals[j])
            if oc then break end
          end
        end
      end
      -- Shadow mode: the bucket's covers every key, an override's its keys.
      local shadow = f[7] == '1'
      if oc and oc >= 1 and op > 0 and od >= 1 then
        capacity, permits, period = oc, op, od
        shadow = shadow or osh
      end
      s.id, s.capacity, s.period, s.shadow = id, capacity, period, shadow
      s.pm = math.floor(permits * 1000000 + 0.5)
      s.per = period * 1000000000000 / s.pm
      -- full_at in the past (or no state, or another incarnation's): full.
      -- A key can owe no more than it holds.
      local full_at = now
      local sv = redis.call('MGET', skey)[1]
      if sv then
        local sid, sfa = string.match(sv, '^(%d+) ([0-9.e+]+)$')
        if sid == id and tonumber(sfa) then full_at = tonumber(sfa) end
      end
      if full_at > now + capacity * s.per then full_at = now + capacity * s.per end
      if full_at < now then full_at = now end
      s.full_at = full_at
    end
  end
  if s.fail then return s.fail end
  if s.want + n > s.capacity then
    return {-3, 0, 0, 0, s.capacity, s.pm, s.period}
  end
  s.want = s.want + n
  local tokens = s.capacity - (s.full_at - now) / s.per
  if tokens < 0 then tokens = 0 end
  -- Tolerance for the rounding of full_at: a billionth of a token.
  if tokens + 0.000000001 >= n then
    s.full_at = s.full_at + n * s.per
    s.took = true
    tokens = tokens - n
    if tokens < 0 then tokens = 0 end
    return {1, math.floor(tokens), 0, us(s.full_at - now), s.capacity, s.pm, s.period}
  end
  local code = 0
  if s.shadow then code = 2 end
  return {code, math.floor(tokens), us((n - tokens) * s.per), us(s.full_at - now), s.capacity, s.pm, s.period}
end

for i = 1, m do
  local kind, ekey, nstr = ARGV[3 * i], ARGV[3 * i + 1], ARGV[3 * i + 2]
  local ans
  if type(nstr) ~= 'string' or #nstr > 10 or not string.find(nstr, '^[1-9][0-9]*$') or tonumber(nstr) > MAX_N then
    ans = INVALID
  elseif kind == 'b' and ekey == '' then
    ans = plain(KEYS[first[i]], tonumber(nstr))
  elseif kind == 'k' then
    ans = keyed(KEYS[first[i]], KEYS[first[i] + 1], ekey, tonumber(nstr))
  else
    ans = INVALID
  end
  worse(ans[1])
  answers[i] = ans
end

if overall == 1 then
  for _, key in ipairs(order) do
    local s = state[key]
    if not s.keyed then
      redis.call('HSET', key, 'tokens', string.format('%.17g', s.tokens), 'ts', string.format('%d', s.ts))
    elseif s.took then
      -- The key's state expires when its bucket is full again.
      local ttl = math.ceil((s.full_at - now) / 1000)
      if ttl < 1 then ttl = 1 end
      if ttl > MAX_US / 1000 then ttl = MAX_US / 1000 end
      redis.call('SET', key, s.id .. ' ' .. string.format('%.17g', s.full_at), 'PX', string.format('%d', ttl))
    end
  end
end
local out = {overall}
for i = 1, m do
  for j = 1, 7 do out[#out + 1] = answers[i][j] end
end
return out
