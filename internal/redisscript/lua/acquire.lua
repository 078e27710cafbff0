
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
