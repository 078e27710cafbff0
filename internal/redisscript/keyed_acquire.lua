-- Sluice keyed acquire: take ARGV[2] tokens for app ARGV[1] from the state of
-- key ARGV[3] in a keyed bucket. KEYS[1] is the hash of the key's group
-- (the bucket's config and its overrides), KEYS[2] the key's state; both
-- share the group's hash tag. One atomic call; the only
-- clock is Redis TIME. The answer is the plain acquire's seven integers
-- {code, remaining, retry_us, reset_us, capacity, permits_micro, period}
-- and an eighth, the source of the limit (0 the bucket's, 1 an exact
-- override, 2 a prefix override); code -5 is an invalid key
-- (docs/protocol.md). Shadow mode: where the bucket (its shadow field is
-- '1') or the override that applies (its value ends in " s") is in shadow
-- mode, a call that would be denied answers code 2 (would deny) and takes
-- nothing.
--
-- Several acquires of one app in one call: KEYS holds a pair (group hash,
-- state) per acquire, ARGV the app and then n and the key of each; the
-- answer is their answers of eight integers one after the other. Each is
-- decided as if it ran alone, in order; they share one reading of TIME and
-- one MGET of their states, which is what makes the call cheaper than
-- separate ones.
--
-- A key's state is one string "<id> <full_at>": the bucket id (a recreated
-- bucket ignores the state of the old one) and the time in microseconds at
-- which the key's bucket is full again. The key expires then, so an idle
-- key costs nothing and a missing key is a full bucket.
local MAX_N = 1000000000
local MAX_US = 1000000000000000 -- durations are capped at 1e15 us (about 31 years)
local MAX_KEY = 256

local app = ARGV[1]
local count = math.floor(#KEYS / 2)
if count < 1 then
  return {-5, 0, 0, 0, 0, 0, 0, 0}
end

local function us(x)
  if x <= 0 then return 0 end
  x = math.ceil(x)
  if x > MAX_US then return MAX_US end
  return x
end

-- An override is "<id> <version> <capacity> <permits> <period>", followed
-- by " s" when it is in shadow mode; a deleted one is a tombstone starting
-- with "d", which matches nothing.
local function limit(v)
  if not v then return nil end
  local c, p, d, s = string.match(v, '^%d+ %d+ (%d+) ([%d.]+) (%d+)( ?s?)$')
  if not c or (s ~= '' and s ~= ' s') then return nil end
  return tonumber(c), tonumber(p), tonumber(d), s == ' s'
end

-- check returns n, or the answer of an acquire refused before its state
-- matters (invalid n or key; the state must be one of this group's: the
-- group key followed by 16 hex digits. Which group and digits a key has is
-- the caller's computation: checking it here with SHA-1 costs a quarter of
-- the call.)
local function check(base, state, nstr, key)
  if type(nstr) ~= 'string' or #nstr > 10 or not string.find(nstr, '^[1-9][0-9]*$') then
    return nil, {-4, 0, 0, 0, 0, 0, 0, 0}
  end
  local n = tonumber(nstr)
  if n > MAX_N then
    return nil, {-4, 0, 0, 0, 0, 0, 0, 0}
  end
  if type(key) ~= 'string' or #key < 1 or #key > MAX_KEY then
    return nil, {-5, 0, 0, 0, 0, 0, 0, 0}
  end
  if type(base) ~= 'string' or type(state) ~= 'string' or string.byte(base, -1) ~= 125
      or #state ~= #base + 16 or string.find(state, base, 1, true) ~= 1
      or not string.find(state, '^[0-9a-f]+$', #base + 1) then
    return nil, {-5, 0, 0, 0, 0, 0, 0, 0}
  end
  return n
end

-- decide answers one acquire of n tokens for key, whose state string is s
-- (false when absent), at time now, and writes the state when it grants.
-- f holds the group's fields capacity, permits, period, apps, id, lens,
-- shadow, and exact the key's exact override (false when none).
local function decide(base, state, n, key, s, now, f, exact)
  local capacity = tonumber(f[1])
  local permits = tonumber(f[2])
  local period = tonumber(f[3])
  local id = f[5]
  if not capacity or not permits or not period or not id or capacity < 1 or permits <= 0 or period < 1 then
    return {-1, 0, 0, 0, 0, 0, 0, 0}
  end

  local apps = f[4]
  if type(app) ~= 'string' or app == '' or string.find(app, ',', 1, true)
      or not apps or not string.find(apps, ',' .. app .. ',', 1, true) then
    return {-2, 0, 0, 0, capacity, math.floor(permits * 1000000 + 0.5), period, 0}
  end

  -- The most specific override wins: the exact key, else the longest
  -- matching prefix (lens lists the prefix lengths present, longest first).
  local src = 0 -- 0 the bucket's own limit, 1 an exact override, 2 a prefix override
  local oc, op, od, osh = limit(exact)
  if oc then
    src = 1
  elseif f[6] and f[6] ~= '' then
    local fields = {}
    for l in string.gmatch(f[6], '%d+') do
      local len = tonumber(l)
      if len <= #key then
        fields[#fields + 1] = 'p:' .. string.sub(key, 1, len)
      end
    end
    if #fields > 0 then
      local vals = redis.call('HMGET', base, unpack(fields))
      for i = 1, #fields do
        oc, op, od, osh = limit(vals[i])
        if oc then
          src = 2
          break
        end
      end
    end
  end
  -- Shadow mode: the bucket's switches off refusals for every key; an
  -- override's for the keys it applies to.
  local shadow = f[7] == '1'
  if oc and oc >= 1 and op > 0 and od >= 1 then
    capacity, permits, period = oc, op, od
    shadow = shadow or osh
  else
    src = 0
  end
  -- permits has at most 6 decimals, so this is the exact count of millionths.
  local pm = math.floor(permits * 1000000 + 0.5)
  if n > capacity then
    return {-3, 0, 0, 0, capacity, pm, period, src}
  end

  -- Microseconds per token, and from empty to full.
  local per = period * 1000000000000 / pm
  local full = capacity * per

  -- full_at in the past (or no state, or another incarnation's): full.
  local full_at = now
  if s then
    local sid, sfa = string.match(s, '^(%d+) ([0-9.e+]+)$')
    if sid == id and tonumber(sfa) then
      full_at = tonumber(sfa)
    end
  end
  -- A bucket can owe no more than it holds: after a config change to a
  -- smaller limit the key holds 0 tokens, not less.
  if full_at > now + full then full_at = now + full end
  if full_at < now then full_at = now end
  local tokens = capacity - (full_at - now) / per
  if tokens < 0 then tokens = 0 end

  -- Tolerance for the rounding of full_at (a double of microseconds): a
  -- billionth of a token.
  if tokens + 0.000000001 >= n then
    full_at = full_at + n * per
    tokens = tokens - n
    if tokens < 0 then tokens = 0 end
    -- In milliseconds, capped like every duration (a slow rate and a large
    -- capacity can be centuries away; '%d' of a larger double is undefined).
    local ttl = math.ceil((full_at - now) / 1000)
    if ttl < 1 then ttl = 1 end
    if ttl > MAX_US / 1000 then ttl = MAX_US / 1000 end
    local v = id .. ' ' .. string.format('%.17g', full_at)
    redis.call('SET', state, v, 'PX', string.format('%d', ttl))
    return {1, math.floor(tokens), 0, us(full_at - now), capacity, pm, period, src}, v
  end
  -- Denied (or, in shadow mode, would deny): nothing is written; the stored
  -- full_at still holds.
  local code = 0
  if shadow then code = 2 end
  return {code, math.floor(tokens), us((n - tokens) * per), us(full_at - now), capacity, pm, period, src}
end

-- Check every acquire, then read the states of those that passed in one
-- MGET, each group's fields (and the exact overrides of its keys) in one
-- HMGET, and the clock once. Acquires write only key states, so reading
-- the groups first reads what each acquire would read alone.
local ns, answers, states = {}, {}, {}
local groups, order = {}, {}
for i = 1, count do
  local base = KEYS[2 * i - 1]
  local n, refused = check(base, KEYS[2 * i], ARGV[2 * i], ARGV[2 * i + 1])
  if n then
    ns[i] = n
    states[#states + 1] = KEYS[2 * i]
    local g = groups[base]
    if not g then
      g = {'capacity', 'permits', 'period', 'apps', 'id', 'lens', 'shadow'}
      groups[base] = g
      order[#order + 1] = base
    end
    g[#g + 1] = 'e:' .. ARGV[2 * i + 1]
  else
    answers[i] = refused
  end
end
local stored = {}
if #states > 0 then
  stored = redis.call('MGET', unpack(states))
end
local fields, next_exact = {}, {}
for _, base in ipairs(order) do
  fields[base] = redis.call('HMGET', base, unpack(groups[base]))
  next_exact[base] = 8
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- A state written by an earlier acquire of this call is the one a later
-- acquire of the same key reads.
local written = {}
local out = {}
local j = 0
for i = 1, count do
  local a = answers[i]
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
    a, v = decide(base, state, ns[i], ARGV[2 * i + 1], s, now, f, f[e])
    if v then written[state] = v end
  end
  for x = 1, 8 do
    out[#out + 1] = a[x]
  end
end
return out
