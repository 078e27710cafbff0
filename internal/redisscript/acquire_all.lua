-- Sluice acquire-all: take tokens from several buckets for app ARGV[1] in
-- one atomic call: either every entry is granted, or nothing is written.
-- ARGV[2] is the number of entries m (1..32); entry i is the three
-- arguments ARGV[3i], ARGV[3i+1], ARGV[3i+2] = kind, key, n. Kind "b" is a
-- plain bucket: it uses the next key of KEYS (the bucket hash), and its key
-- argument must be empty. Other kinds (keyed buckets) are reserved: they
-- will name how many KEYS they use. The answer is {overall, then seven
-- integers per entry in the acquire script's layout} (docs/protocol.md).
-- A bucket whose shadow field is "1" never refuses: an entry it would deny
-- answers 2 and takes nothing.
local MAX_N = 1000000000
local MAX_ENTRIES = 32
local MAX_US = 1000000000000000
local INVALID = {-4, 0, 0, 0, 0, 0, 0}

local m = ARGV[2]
if type(m) ~= 'string' or #m > 2 or not string.find(m, '^[1-9][0-9]*$') then
  return {-4}
end
m = tonumber(m)
if m > MAX_ENTRIES or #ARGV ~= 2 + 3 * m or #KEYS ~= m then
  return {-4}
end
local app = ARGV[1]
local app_ok = type(app) == 'string' and app ~= '' and not string.find(app, ',', 1, true)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- One state per distinct key, so that an entry naming a bucket twice sees
-- what the earlier entry took.
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

for i = 1, m do
  local kind, ekey, nstr = ARGV[3 * i], ARGV[3 * i + 1], ARGV[3 * i + 2]
  local key = KEYS[i]
  local ans
  if kind ~= 'b' or ekey ~= '' or type(nstr) ~= 'string' or #nstr > 10 or not string.find(nstr, '^[1-9][0-9]*$')
      or tonumber(nstr) > MAX_N then
    ans = INVALID
  else
    local n = tonumber(nstr)
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
      local us = math.ceil(want * s.period * 1000000000000 / s.pm)
      if us > MAX_US then return MAX_US end
      return us
    end
    if not s.pm then
      ans = {-1, 0, 0, 0, 0, 0, 0}
    elseif not app_ok or not s.apps or not string.find(s.apps, ',' .. app .. ',', 1, true) then
      ans = {-2, 0, 0, 0, s.capacity, s.pm, s.period}
    elseif s.want + n > s.capacity then
      -- Alone or together with the earlier entries of this bucket, more
      -- than the bucket ever holds.
      ans = {-3, 0, 0, 0, s.capacity, s.pm, s.period}
    else
      s.want = s.want + n
      local avail = s.tokens
      if avail < 0 then avail = 0 end -- in debt: nothing to take
      if avail >= n then
        s.tokens = s.tokens - n
        ans = {1, math.floor(s.tokens), 0, until_us(s.capacity - s.tokens), s.capacity, s.pm, s.period}
      else
        -- A bucket in shadow mode never refuses: it answers 2 (would deny),
        -- takes nothing, and does not hold back the set.
        local code = 0
        if s.shadow then code = 2 end
        ans = {code, math.floor(avail), until_us(n - s.tokens), until_us(s.capacity - s.tokens), s.capacity, s.pm,
          s.period}
      end
    end
  end
  worse(ans[1])
  answers[i] = ans
end

if overall == 1 then
  for _, key in ipairs(order) do
    local s = state[key]
    redis.call('HSET', key, 'tokens', string.format('%.17g', s.tokens), 'ts', string.format('%d', s.ts))
  end
end
local out = {overall}
for i = 1, m do
  for j = 1, 7 do out[#out + 1] = answers[i][j] end
end
return out
