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

-- Sluice acquire: take ARGV[2] tokens for app ARGV[1] from the bucket hash
-- KEYS[1]. The answer is seven integers: {code, remaining, retry_us,
-- reset_us, capacity, permits_micro, period} (docs/protocol.md). A client
-- that passes ARGV[3] = '2' (protocol 2) gets two more on allowed, denied
-- and would-deny answers: lease_ms (0 when not in lease mode) and shadow
-- (1 in shadow mode, else 0); ARGV[3] = '3' (protocol 3) adds a third,
-- the bucket's reserve. A bucket whose shadow field is '1' never denies:
-- where it would, it answers code 2 (would deny) and takes nothing.
-- ARGV[4] = '1' marks the request critical: it may take the bucket's
-- reserve, which every other request must leave. A hash of kind 'quota'
-- is a calendar quota (lua/quota.lua): the same answer, counted per
-- period, with no reserve.
-- unpacked_fields returns what unpacked does, from the fields kind, capacity,
-- permits, period, lease_ms, shadow and reserve (f, in that order), or nil
-- when they hold no limit of a token bucket or a quota.
local function unpacked_fields(f)
  local k = 0
  if f[1] == 'quota' then
    k = 1
  elseif f[1] and f[1] ~= 'bucket' then
    return nil
  end
  local c, pm, d = kind_limit(f[1], f[2], f[3], f[4])
  if not c then return nil end
  local shadow = 0
  if f[6] == '1' then shadow = 1 end
  return k, c, pm, d, tonumber(f[5]) or 0, shadow, f[7]
end

local n = count(ARGV[2])
if not n or n < 1 then
  return {-4, 0, 0, 0, 0, 0, 0}
end
-- The binary state, the packed limit and the apps in one HMGET
-- (lua/state.lua, lua/packed.lua); a hash without the binary state keeps
-- the decimal one.
local f = redis.call('HMGET', KEYS[1], 'st', 'cfg', 'apps')
local kind, capacity, pm, period, lease_ms, shadow_f, reserve = unpacked(f[2])
if not kind then
  kind, capacity, pm, period, lease_ms, shadow_f, reserve = unpacked_fields(redis.call('HMGET', KEYS[1], 'kind',
    'capacity', 'permits', 'period', 'lease_ms', 'shadow', 'reserve'))
end
-- A limit of another kind than a token bucket or a quota is not this
-- script's to take from.
if kind ~= 0 and kind ~= 1 then
  return {-1, 0, 0, 0, 0, 0, 0}
end
if not app_ok(ARGV[1], f[3]) then
  return {-2, 0, 0, 0, capacity, pm, period}
end
local res = 0
if kind == 0 then res = kept(reserve, capacity, false) end
local r = res
if ARGV[4] == '1' then r = 0 end
if n > capacity - r then
  return {-3, 0, 0, 0, capacity, pm, period}
end
local shadow = shadow_f == 1
local lease, sh
if ARGV[3] == '2' or ARGV[3] == '3' then
  lease, sh = lease_ms, 0
  if shadow then sh = 1 end
end
if ARGV[3] ~= '3' then res = nil end
if kind == 1 then
  -- A quota (capacity is the quota): the count of the period containing
  -- now, kept with the period's start; a table that does not cover now
  -- is no valid config. Quotas have no lease mode and no reserve.
  local now = now_us()
  local q = redis.call('HMGET', KEYS[1], 'used', 'pstart', 'pend')
  local s, e, used = counted(q[1], q[2], q[3], now)
  if not s then
    s, e = period_of(redis.call('HGET', KEYS[1], 'bounds'), now)
    if not s then
      return {-1, 0, 0, 0, 0, 0, 0}
    end
    used = 0
    if tonumber(q[2]) == s then used = tonumber(q[1]) or 0 end
  end
  if lease then lease = 0 end
  local u, answer = quota_take(capacity, used, n, s, e, now, shadow, lease, sh, res)
  if u then
    redis.call('HSET', KEYS[1], 'used', string.format('%d', u), 'pstart', string.format('%d', s), 'pend',
      string.format('%d', e))
  end
  return answer
end
local tokens, ts, binary = state_of(KEYS[1], f[1])
tokens, ts = refill(tokens, ts, now_us(), capacity, pm, period)
local left, answer = take(tokens, n, capacity, pm, period, shadow, r, lease, sh, res)
-- A denial writes nothing: refill is a pure function of time, so the
-- stored (tokens, ts) pair still yields the same count later.
if left then put(KEYS[1], left, ts, binary) end
return answer
