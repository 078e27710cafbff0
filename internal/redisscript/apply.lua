-- Sluice apply: write a bucket config, guarded by (id, version).
-- KEYS[1] bucket hash, KEYS[2] tombstone.
-- ARGV: id, version, capacity, permits, period, apps, force ("1" or "0"),
-- lease_ms (optional, "0" when absent: lease mode off), shadow (optional,
-- "1" or "0", "0" when absent: shadow mode off), kind (optional, "bucket"
-- when absent; the other kinds send permits and period "0"), bounds (the
-- eleventh: a quota's table of period starts, lua/quota.lua; "" or absent
-- for the other kinds), slot_ms (the twelfth: a concurrency limit's slot
-- lease time; "0" or absent for the other kinds), reserve (the thirteenth:
-- the tokens kept for critical requests, 0 to capacity - 1, "0" when
-- absent; only a token bucket has one), state (the fourteenth: "binary"
-- keeps the bucket's state in the binary form, "decimal" or absent in
-- the decimal one, lua/state.lua). A quota's count (used, pstart) is kept
-- by an update and dropped with a new incarnation; the tokens are kept
-- when the state changes form.
-- Returns 1 created, 2 updated, 3 unchanged, 4 stale, 5 tombstoned.

-- Arguments are checked by config_guards.lua, sent before this file: a bad
-- one is an error naming it, and nothing is written.
local function invalid(what)
  return redis.error_reply('ERR sluice apply: invalid ' .. what)
end
local id = int_arg(ARGV[1], 1, MAX_INT)
if not id then return invalid('id') end
local version = int_arg(ARGV[2], 0, MAX_INT)
if not version then return invalid('version') end
local capacity = int_arg(ARGV[3], 1, 1000000000)
if not capacity then return invalid('capacity') end
local kind = kind_arg(ARGV[10])
if not kind then return invalid('kind') end
if kind ~= 'bucket' then
  -- Only a token bucket refills.
  if ARGV[4] ~= '0' or ARGV[5] ~= '0' then return invalid('permits or period') end
elseif not permits_arg(ARGV[4]) then
  return invalid('permits')
elseif not int_arg(ARGV[5], 1, 31536000) then
  return invalid('period')
end
if not apps_arg(ARGV[6]) then return invalid('apps') end
if not flag_arg(ARGV[7]) then return invalid('force') end
local force = ARGV[7] == '1'
-- lease_ms: 0 (off) or a lease time in milliseconds; the sync worker
-- sends only 0 or MinLeaseMillis..MaxLeaseMillis.
local lease = ARGV[8] or '0'
if not int_arg(lease, 0, 10000) then return invalid('lease_ms') end
-- shadow: "1" puts the bucket in shadow mode (acquire answers 2, would
-- deny, instead of denying); "0" (or absent) is the normal mode.
local shadow = flag_arg(ARGV[9], true)
if not shadow then return invalid('shadow') end
-- bounds: a quota's table of period starts; "" for the other kinds.
local bounds = bounds_arg(ARGV[11], kind)
if not bounds then return invalid('bounds') end
local slot_ms = slot_ms_arg(ARGV[12], kind)
if not slot_ms then return invalid('slot_ms') end
-- reserve: tokens only critical requests may take, below the capacity;
-- only a token bucket has one.
local reserve = ARGV[13] or '0'
if not int_arg(reserve, 0, capacity - 1) or (kind ~= 'bucket' and reserve ~= '0') then
  return invalid('reserve')
end

-- state: the form of the bucket's state; the binary form needs the struct
-- library, and a server without it keeps the decimal one.
local state = ARGV[14] or 'decimal'
if state ~= 'binary' and state ~= 'decimal' then return invalid('state') end
local binary = state == 'binary' and rawget(_G, 'struct') ~= nil

if tombstoned(id) then
  return 5
end

local cur = redis.call('HMGET', KEYS[1], 'id', 'version', 'capacity', 'permits', 'period', 'apps', 'tokens', 'ts',
  'lease_ms', 'shadow', 'kind', 'slot_ms', 'bounds', 'reserve', 'cfg', 'st')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- The packed limit (lua/packed.lua); nil on a server without struct.
local cfg = packed(kind, ARGV[3], ARGV[4], ARGV[5], lease, shadow, reserve, slot_ms)

-- A new hash gets its fields in this order: Redis finds a field of a small
-- hash by scanning from the first, and every acquire reads the state, cfg
-- and apps (and without cfg the limit, lease_ms, shadow, kind and reserve).
local function write(tokens, ts, fresh)
  local f = state_fields({'HSET', KEYS[1]}, tokens, ts, binary)
  if cfg then
    f[#f + 1], f[#f + 2] = 'cfg', cfg
  end
  f[#f + 1], f[#f + 2] = 'apps', ARGV[6]
  -- A quota's count, its period's start and its end come next (the
  -- acquire reads them second): a new incarnation counts 0 of no period;
  -- an update keeps the count and forgets the end, so that the next
  -- acquire finds the period in the table it may have changed.
  if kind == 'quota' then
    if fresh then
      f[#f + 1], f[#f + 2], f[#f + 3], f[#f + 4] = 'used', '0', 'pstart', '0'
    end
    f[#f + 1], f[#f + 2] = 'pend', '0'
  end
  for _, v in ipairs({'capacity', ARGV[3], 'permits', ARGV[4], 'period', ARGV[5], 'lease_ms', lease,
    'shadow', shadow, 'kind', kind, 'reserve', reserve, 'id', ARGV[1], 'version', ARGV[2]}) do
    f[#f + 1] = v
  end
  redis.call(unpack(f))
  -- Only a concurrency limit has a slot lease time, only a quota a table:
  -- a bucket's hash keeps its fields.
  if kind == 'concurrency' then redis.call('HSET', KEYS[1], 'slot_ms', slot_ms) end
  if kind == 'quota' then redis.call('HSET', KEYS[1], 'bounds', bounds) end
end

local cid = tonumber(cur[1])
if not cid or cid < id then
  -- A new bucket, or a new incarnation of the name: it starts full.
  redis.call('DEL', KEYS[1])
  write(capacity, now, true)
  return 1
end

if stale(cid, tonumber(cur[2]) or -1, id, version, force) then
  return 4
end
local tokens, ts, was_binary = stored(cur[16], cur[7], cur[8])
if same_config(cur) and was_binary == binary and (cur[9] or '0') == lease and (cur[10] or '0') == shadow
    and (cur[11] or 'bucket') == kind and (cur[12] or '0') == slot_ms and (cur[13] or '') == bounds
    and (cur[14] or '0') == reserve and (cur[15] or false) == (cfg or false) then
  return 3
end

-- Keep the tokens: refill up to now at the old rate so nothing accrued is
-- lost, then clamp to the new capacity.
local ocap, operm, oper = tonumber(cur[3]), tonumber(cur[4]), tonumber(cur[5])
tokens, ts = tonumber(tokens), tonumber(ts)
if not tokens or not ts or not ocap or not operm or not oper or oper < 1 then
  tokens, ts = capacity, now
else
  if now > ts then
    local opm = math.floor(operm * 1000000 + 0.5)
    tokens = tokens + (now - ts) * opm / (oper * 1000000000000)
    ts = now
  end
  if tokens > ocap then tokens = ocap end
end
if tokens > capacity then tokens = capacity end
if tokens < 0 then tokens = 0 end
if was_binary ~= binary then
  -- The state changes form: the hash is written anew with the state in
  -- its new form first (where the acquire finds it soonest), then every
  -- other field it held, in its order; write then sets the config in place.
  local old = redis.call('HGETALL', KEYS[1])
  redis.call('DEL', KEYS[1])
  local c = state_fields({'HSET', KEYS[1]}, tokens, ts, binary)
  for i = 1, #old, 2 do
    local k = old[i]
    if k ~= 'st' and k ~= 'tokens' and k ~= 'ts' then
      c[#c + 1], c[#c + 2] = k, old[i + 1]
    end
  end
  redis.call(unpack(c))
end
write(tokens, ts, false)
return 2
