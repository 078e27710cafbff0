-- Sluice keyed apply: write a keyed bucket's config into one of its key
-- groups, guarded by (id, version) like apply.lua.
-- KEYS[1] group hash, KEYS[2] group tombstone. ARGV as for apply: id, version, capacity, permits, period,
-- apps, force, lease_ms (ignored: keyed buckets have no lease mode), shadow ("1" or "0", "0" when absent:
-- shadow mode off), kind (absent: "bucket"), bounds (the eleventh: a quota's table, as for apply), slot_ms (the
-- twelfth: a concurrency limit's slot lease time; "0" or absent for the other kinds), reserve (the thirteenth:
-- 0 to capacity - 1, "0" when absent; only a token bucket has one).
-- Returns 1 created, 2 updated, 3 unchanged, 4 stale, 5 tombstoned.
local id = int_arg(ARGV[1], 1, MAX_INT)
local version = int_arg(ARGV[2], 0, MAX_INT)
local force = flag_arg(ARGV[7])
local shadow = flag_arg(ARGV[9], true)
local kind = kind_arg(ARGV[10])
local bounds = bounds_arg(ARGV[11], kind)
local slot_ms = slot_ms_arg(ARGV[12], kind)
local reserve = ARGV[13] or '0'
if not id or not version or not kind or not limit_args(ARGV[3], ARGV[4], ARGV[5], kind) or not apps_arg(ARGV[6])
    or not force or not shadow or not bounds or not slot_ms or not int_arg(reserve, 0, tonumber(ARGV[3]) - 1)
    or (kind ~= 'bucket' and reserve ~= '0') then
  return redis.error_reply('ERR sluice keyed apply: invalid arguments')
end
force = force == '1'

if tombstoned(id) then
  return 5
end

local cur = redis.call('HMGET', KEYS[1], 'id', 'version', 'capacity', 'permits', 'period', 'apps', 'shadow', 'kind',
  'slot_ms', 'bounds', 'reserve')
local cid = tonumber(cur[1])
local created = false
if not cid or cid < id then
  -- A new keyed bucket, or a new incarnation: the old one's overrides go.
  -- Key states carry the id, so the old incarnation's are ignored.
  if cid then
    redis.call('DEL', KEYS[1])
  end
  created = true
else
  if stale(cid, tonumber(cur[2]) or -1, id, version, force) then
    return 4
  end
  if same_config(cur) and (cur[7] or '0') == shadow and (cur[8] or 'bucket') == kind and (cur[9] or '0') == slot_ms
      and (cur[10] or '') == bounds and (cur[11] or '0') == reserve then
    return 3
  end
  if cid ~= id then
    -- Forced over a newer incarnation (MySQL restored): its overrides go,
    -- the reconcile writes this one's.
    redis.call('DEL', KEYS[1])
  end
end
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'version', ARGV[2], 'capacity', ARGV[3], 'permits', ARGV[4],
  'period', ARGV[5], 'apps', ARGV[6], 'shadow', shadow, 'kind', kind, 'reserve', reserve)
if kind == 'concurrency' then redis.call('HSET', KEYS[1], 'slot_ms', slot_ms) end
if kind == 'quota' then redis.call('HSET', KEYS[1], 'bounds', bounds) end
if redis.call('HEXISTS', KEYS[1], 'lens') == 0 then
  redis.call('HSET', KEYS[1], 'lens', '')
end
if created then return 1 end
return 2
