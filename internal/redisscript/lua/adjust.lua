
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
