
-- Sluice slot: take, release or renew a slot of a shared concurrency limit
-- for app ARGV[1] (docs/protocol.md, "Concurrency limits"). ARGV[2] is the
-- op ('take', 'release' or 'renew'), ARGV[3] the slot id. KEYS[1] is the
-- limit's hash, KEYS[2] its slot set: KEYS[1] followed by ':slots'. The
-- answer is seven integers: {code, in_use, limit, retry_us, slot_ms,
-- source, shadow} (source is always 0, the limit's own).
local app, op, id = ARGV[1], ARGV[2], ARGV[3]
if (op ~= 'take' and op ~= 'release' and op ~= 'renew') or not slot_id_ok(id) then
  return {-4, 0, 0, 0, 0, 0, 0}
end
if KEYS[2] ~= KEYS[1] .. ':slots' then return {-5, 0, 0, 0, 0, 0, 0} end
-- The packed limit and the apps in one HMGET; without a packed limit, the
-- fields, where a concurrency limit's rate fields are not read: only
-- another kind's (rarely sent here) needs them, to tell a token bucket
-- from no limit.
local f = redis.call('HMGET', KEYS[1], 'cfg', 'apps')
local kind, limit, _, _, _, sh, _, ms = unpacked(f[1])
local shadow = sh == 1
if kind == 2 then
  ms = slot_ms_of('concurrency', ms)
elseif kind then
  ms = nil
else
  local g = redis.call('HMGET', KEYS[1], 'capacity', 'shadow', 'kind', 'slot_ms')
  local p = {}
  if g[3] ~= 'concurrency' then p = redis.call('HMGET', KEYS[1], 'permits', 'period') end
  limit = kind_limit(g[3], g[1], p[1], p[2])
  if not limit then return {-1, 0, 0, 0, 0, 0, 0} end
  ms, shadow = slot_ms_of(g[3], g[4]), g[2] == '1'
end
if not app_ok(app, f[2]) then return {-2, 0, limit, 0, ms or 0, 0, 0} end
-- A limit of another kind (a token bucket, a quota) has no slots.
if not ms then return {-6, 0, limit, 0, 0, 0, 0} end
return slot_op(op, KEYS[2], id, now_us(), limit, ms, shadow, 0)
