-- Sluice apply: write a bucket config, guarded by (id, version).
-- KEYS[1] bucket hash, KEYS[2] tombstone.
-- ARGV: id, version, capacity, permits, period, apps, force ("1" or "0"),
-- lease_ms (optional, "0" when absent: lease mode off), shadow (optional,
-- "1" or "0", "0" when absent: shadow mode off).
-- Returns 1 created, 2 updated, 3 unchanged, 4 stale, 5 tombstoned.

-- Arguments: exactly the formats of docs/protocol.md ("Argument formats"),
-- else an error naming the first bad one and nothing is written. tonumber
-- alone would also take "1e1", "0x10", " 1" or "1.0".
-- ---- argument validation ----
local MAX_INT = 9007199254740991 -- 2^53 - 1: larger integers are not exact in Lua

-- A plain decimal integer lo..hi: digits only, no leading zero.
local function int_arg(s, lo, hi)
  if type(s) ~= 'string' or #s > 16 or not (s == '0' or string.find(s, '^[1-9][0-9]*$')) then
    return nil
  end
  local v = tonumber(s)
  if v < lo or v > hi then return nil end
  return v
end

-- Permits: canonical decimal, at most 10 integer digits and 6 decimals,
-- no leading or trailing zeros ("0.5", "100", "1.000001"), from 0.000001
-- to 1000000000. Canonical, so that equal configs are equal strings.
local function permits_arg(s)
  if type(s) ~= 'string' then return false end
  local whole, frac = string.match(s, '^([0-9]+)%.([0-9]+)$')
  if not whole then
    whole, frac = string.match(s, '^[0-9]+$'), ''
  end
  if not whole or #whole > 10 or #frac > 6 or (#whole > 1 and string.sub(whole, 1, 1) == '0')
      or string.sub(frac, -1) == '0' then
    return false
  end
  local micro = tonumber(whole) * 1000000 + tonumber(frac .. string.rep('0', 6 - #frac))
  return micro >= 1 and micro <= 1000000000000000
end

-- Apps: ",a,b,", one or more names ^[a-z0-9][a-z0-9._-]{0,62}$.
local function apps_arg(s)
  if type(s) ~= 'string' or #s < 3 or string.sub(s, 1, 1) ~= ',' or string.sub(s, -1) ~= ',' then
    return false
  end
  for app in string.gmatch(string.sub(s, 2), '([^,]*),') do
    if #app > 63 or not string.find(app, '^[a-z0-9][a-z0-9._%-]*$') then return false end
  end
  return true
end

local function invalid(what)
  return redis.error_reply('ERR sluice apply: invalid ' .. what)
end
local id = int_arg(ARGV[1], 1, MAX_INT)
if not id then return invalid('id') end
local version = int_arg(ARGV[2], 0, MAX_INT)
if not version then return invalid('version') end
local capacity = int_arg(ARGV[3], 1, 1000000000)
if not capacity then return invalid('capacity') end
if not permits_arg(ARGV[4]) then return invalid('permits') end
local period = int_arg(ARGV[5], 1, 31536000)
if not period then return invalid('period') end
if not apps_arg(ARGV[6]) then return invalid('apps') end
if ARGV[7] ~= '1' and ARGV[7] ~= '0' then return invalid('force') end
local force = ARGV[7] == '1'
-- lease_ms: 0 (off) or a lease time in milliseconds; the sync worker
-- sends only 0 or MinLeaseMillis..MaxLeaseMillis.
local lease = ARGV[8] or '0'
if not int_arg(lease, 0, 10000) then return invalid('lease_ms') end
-- shadow: "1" puts the bucket in shadow mode (acquire answers 2, would
-- deny, instead of denying); "0" (or absent) is the normal mode.
local shadow = ARGV[9] or '0'
if shadow ~= '1' and shadow ~= '0' then return invalid('shadow') end
-- ---- end of argument validation ----

-- A deleted incarnation, or an older one, never comes back.
local tomb = tonumber(redis.call('GET', KEYS[2]))
if tomb and tomb >= id then
  return 5
end

local cur = redis.call('HMGET', KEYS[1], 'id', 'version', 'capacity', 'permits', 'period', 'apps', 'tokens', 'ts',
  'lease_ms', 'shadow')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local function write(tokens, ts)
  redis.call('HSET', KEYS[1], 'id', ARGV[1], 'version', ARGV[2], 'capacity', ARGV[3], 'permits', ARGV[4],
    'period', ARGV[5], 'apps', ARGV[6], 'lease_ms', lease, 'shadow', shadow, 'tokens', string.format('%.17g', tokens),
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
    and cur[6] == ARGV[6] and (cur[9] or '0') == lease and (cur[10] or '0') == shadow then
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
