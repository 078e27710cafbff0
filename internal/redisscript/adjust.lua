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

-- Sluice adjust: give tokens back to, or take them after the fact from,
-- the bucket hash KEYS[1] for app ARGV[1]. ARGV[2] is the operation,
-- ARGV[3] n (a plain decimal integer 1..1e9):
--   refund:  add n tokens, never above capacity;
--   charge:  take n tokens whatever is left; the bucket may go into debt
--            (negative tokens), never below -capacity;
--   reserve: take n tokens now if that leaves at least -capacity, else
--            take nothing; the caller waits until the debt is paid.
-- The answer is eight integers: {code, remaining, retry_us, reset_us,
-- capacity, permits_micro, period, applied} (docs/protocol.md).
local op, n = ARGV[2], count(ARGV[3])
if (op ~= 'refund' and op ~= 'charge' and op ~= 'reserve') or not n or n < 1 then
  return {-4, 0, 0, 0, 0, 0, 0, 0}
end
local f = redis.call('HMGET', KEYS[1], 'capacity', 'permits', 'period', 'apps', 'tokens', 'ts', 'kind', 'st')
local capacity, pm, period = limit_of(f[1], f[2], f[3])
-- Only a token bucket has tokens to adjust: a quota or another kind is not
-- this script's.
if not capacity or (f[7] and f[7] ~= 'bucket') then
  return {-1, 0, 0, 0, 0, 0, 0, 0}
end
if not app_ok(ARGV[1], f[4]) then
  return {-2, 0, 0, 0, capacity, pm, period, 0}
end
if op == 'reserve' and n > capacity then
  return {-3, 0, 0, 0, capacity, pm, period, 0}
end
local tokens, ts, binary = stored(f[8], f[5], f[6])
tokens, ts = refill(tokens, ts, now_us(), capacity, pm, period)
local floor = -capacity -- the deepest debt
if tokens < floor then tokens = floor end
local before = tokens
local retry = 0
if op == 'refund' then
  tokens = tokens + n
  if tokens > capacity then tokens = capacity end
elseif op == 'charge' then
  tokens = tokens - n
  if tokens < floor then tokens = floor end
else
  if tokens - n < floor then
    -- Too deep: nothing taken; retry when taking n leaves exactly -capacity.
    return {0, math.floor(tokens), until_us(floor + n - tokens, pm, period), until_us(capacity - tokens, pm, period),
      capacity, pm, period, 0}
  end
  tokens = tokens - n
  -- The reservation is honoured once the debt is paid.
  retry = until_us(-tokens, pm, period)
end
put(KEYS[1], tokens, ts, binary)
local applied = tokens - before
if applied < 0 then applied = -applied end
return {1, math.floor(tokens), retry, until_us(capacity - tokens, pm, period), capacity, pm, period,
  math.floor(applied + 0.5)}
