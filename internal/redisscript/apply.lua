-- Sluice apply: write a bucket config, guarded by (id, version).
-- KEYS[1] bucket hash, KEYS[2] tombstone.
-- ARGV: id, version, capacity, permits, period, apps, force ("1" or "0"),
-- lease_ms (optional, "0" when absent: lease mode off).
-- Returns 1 created, 2 updated, 3 unchanged, 4 stale, 5 tombstoned.
local id = tonumber(ARGV[1])
local version = tonumber(ARGV[2])
local capacity = tonumber(ARGV[3])
local permits = tonumber(ARGV[4])
local period = tonumber(ARGV[5])
if not id or not version or not capacity or not permits or not period or capacity < 1 or permits <= 0
    or period < 1 or type(ARGV[6]) ~= 'string' then
  return redis.error_reply('ERR sluice apply: invalid arguments')
end
local force = ARGV[7] == '1'
local lease = ARGV[8] or '0'
if not string.find(lease, '^[0-9]+$') then
  return redis.error_reply('ERR sluice apply: invalid arguments')
end

-- A deleted incarnation, or an older one, never comes back.
local tomb = tonumber(redis.call('GET', KEYS[2]))
if tomb and tomb >= id then
  return 5
end

local cur = redis.call('HMGET', KEYS[1], 'id', 'version', 'capacity', 'permits', 'period', 'apps', 'tokens', 'ts',
  'lease_ms')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local function write(tokens, ts)
  redis.call('HSET', KEYS[1], 'id', ARGV[1], 'version', ARGV[2], 'capacity', ARGV[3], 'permits', ARGV[4],
    'period', ARGV[5], 'apps', ARGV[6], 'lease_ms', lease, 'tokens', string.format('%.17g', tokens),
    'ts', string.format('%d', ts))
end

local cid = tonumber(cur[1])
if not cid or cid < id then
  -- A new bucket, or a new incarnation of the name: it starts full.
  redis.call('DEL', KEYS[1])
  write(capacity, now)
  return 1
end

local cver = tonumber(cur[2]) or -1
if not force and (cid > id or (cid == id and cver > version)) then
  return 4
end
if cid == id and cver == version and cur[3] == ARGV[3] and cur[4] == ARGV[4] and cur[5] == ARGV[5]
    and cur[6] == ARGV[6] and (cur[9] or '0') == lease then
  return 3
end

-- Keep the tokens: refill up to now at the old rate so nothing accrued is
-- lost, then clamp to the new capacity.
local ocap, operm, oper = tonumber(cur[3]), tonumber(cur[4]), tonumber(cur[5])
local tokens, ts = tonumber(cur[7]), tonumber(cur[8])
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
write(tokens, ts)
return 2
