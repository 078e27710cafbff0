-- Sluice config guards: the argument formats and (id, version) guards that
-- the sync worker's scripts share. Each of them (apply, keyed apply,
-- override, delete) is sent as this file followed by its own.

-- Arguments: exactly the formats of docs/protocol.md ("Argument formats").
-- tonumber alone would also take "1e1", "0x10", " 1" or "1.0".
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

-- A kind: "bucket", "concurrency" or "quota"; absent is "bucket" (every
-- caller written before kinds existed). nil when none of them.
local function kind_arg(s)
  if s == nil or s == 'bucket' then return 'bucket' end
  if s == 'concurrency' or s == 'quota' then return s end
  return nil
end

-- A limit: capacity, permits and period in their formats. Only a token
-- bucket refills: the other kinds send permits and period "0" (kind
-- "any": an override, whose bucket's kind the hash knows, may be either).
local function limit_args(capacity, permits, period, kind)
  if int_arg(capacity, 1, 1000000000) == nil then return false end
  if kind ~= 'bucket' and permits == '0' and period == '0' then return true end
  return kind ~= 'concurrency' and kind ~= 'quota' and permits_arg(permits) and int_arg(period, 1, 31536000) ~= nil
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

-- A flag: "1" or "0"; absent is "0" when absent_ok. nil when neither.
local function flag_arg(s, absent_ok)
  if s == nil and absent_ok then return '0' end
  if s == '1' or s == '0' then return s end
  return nil
end

-- tombstoned: KEYS[2], the tombstone, holds id or a newer one. A deleted
-- incarnation, or an older one, never comes back.
local function tombstoned(id)
  local tomb = tonumber(redis.call('GET', KEYS[2]))
  return tomb ~= nil and tomb >= id
end

-- stale: what is stored, (cid, cver), is newer than (id, version), and
-- force (a reconcile that knows MySQL is right) does not override it.
-- Events may arrive late or twice; an older one never overwrites a newer.
local function stale(cid, cver, id, version, force)
  return not force and (cid > id or (cid == id and cver > version))
end

-- same_config: cur, the hash's id, version, capacity, permits, period and
-- apps (an HMGET in that order), are ARGV[1..6] to the letter. Each has one
-- canonical form, so equal strings are equal values.
local function same_config(cur)
  for i = 1, 6 do
    if cur[i] ~= ARGV[i] then return false end
  end
  return true
end

