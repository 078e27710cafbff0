
-- Sluice keyed slot: take, release or renew a slot of one key of a keyed
-- concurrency limit for app ARGV[1] (docs/protocol.md, "Concurrency
-- limits"). ARGV[2] is the op ('take', 'release' or 'renew'), ARGV[3] the
-- slot id, ARGV[4] the key. KEYS[1] is the key's group hash, KEYS[2] the
-- key's slot set: its state key followed by ':slots'. The limit is the
-- key's: its exact override, else its longest prefix override, else the
-- limit's own. The answer is seven integers: {code, in_use, limit,
-- retry_us, slot_ms, source, shadow}.
local app, op, id, key = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if (op ~= 'take' and op ~= 'release' and op ~= 'renew') or not slot_id_ok(id) then
  return {-4, 0, 0, 0, 0, 0, 0}
end
local base, set = KEYS[1], KEYS[2]
if type(set) ~= 'string' or string.sub(set, -6) ~= ':slots' or key_refusal(base, string.sub(set, 1, -7), key) then
  return {-5, 0, 0, 0, 0, 0, 0}
end
local f = group_read(base, key, 'slot_ms')
local code, limit, _pm, _period, shadow, src = key_limit(base, key, app, f, f[EXACT])
if code == -1 then return {-1, 0, 0, 0, 0, 0, 0} end
local ms = slot_ms_of(f[8], f[EXACT + 1])
if code ~= 0 then return {code, 0, limit, 0, ms or 0, 0, 0} end
-- A limit of another kind (a token bucket, a quota) has no slots.
if not ms then return {-6, 0, limit, 0, 0, 0, 0} end
return slot_op(op, set, id, now_us(), limit, ms, shadow, src)
