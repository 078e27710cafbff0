-- Sluice override: write, delete or purge one override of a keyed bucket in
-- one of its key groups, guarded by the override's (id, version).
-- KEYS[1] group hash (holds exact overrides as fields "e:<key>" and prefix
-- overrides as "p:<prefix>"), KEYS[2] group tombstone.
-- ARGV: bucket id, op ("set", "del" or "purge"), match ("e" or "p"), key,
-- override id, version, capacity, permits, period, force ("1" or "0"),
-- shadow ("1" or "0"; "set" only), purge cutoff (unix seconds; "purge"
-- only).
-- An override is stored as "<id> <version> <capacity> <permits> <period>",
-- followed by " s" for an override in shadow mode; a deleted one as the
-- tombstone "d <id> <version> <unix seconds>".
-- Returns for "set": 1 created, 2 updated, 3 unchanged; for "del": 1
-- deleted, 0 absent; for "purge": 1 purged, 0 kept; for all: 4 stale (a
-- newer (id, version) is there, or the group holds a newer incarnation of
-- the bucket), 5 tombstoned (the bucket was deleted), 6 no bucket (the
-- group has no config of this bucket yet).
local bid = int_arg(ARGV[1], 1, MAX_INT)
local op = ARGV[2]
local match = ARGV[3]
local key = ARGV[4]
local oid = int_arg(ARGV[5], 1, MAX_INT)
local ver = int_arg(ARGV[6], 0, MAX_INT)
local force = flag_arg(ARGV[10])
local shadow = flag_arg(ARGV[11], true)
if not bid or not oid or not ver or (op ~= 'set' and op ~= 'del' and op ~= 'purge')
    or (match ~= 'e' and match ~= 'p') or type(key) ~= 'string' or #key < 1 or #key > 256
    or (op == 'set' and not limit_args(ARGV[7], ARGV[8], ARGV[9], 'any')) or not force or not shadow then
  return redis.error_reply('ERR sluice override: invalid arguments')
end
force = force == '1'

if tombstoned(bid) then
  return 5
end
local gid = tonumber(redis.call('HGET', KEYS[1], 'id'))
if not gid or gid < bid then
  return 6
end
if gid > bid then
  return 4
end

local hash, field = KEYS[1], match .. ':' .. key
local cur = redis.call('HGET', hash, field)
local live, cid, cver = false, nil, nil
if cur then
  local a, b = string.match(cur, '^(%d+) (%d+) ')
  if a then
    live = true
  else
    a, b = string.match(cur, '^d (%d+) (%d+) ')
  end
  cid, cver = tonumber(a), tonumber(b)
end

if op == 'purge' then
  local ts = cur and not live and tonumber(string.match(cur, '^d %d+ %d+ (%d+)$'))
  if ts and ts < (tonumber(ARGV[12]) or 0) then
    redis.call('HDEL', hash, field)
    return 1
  end
  return 0
end

if cid and stale(cid, cver, oid, ver, force) then
  return 4
end

-- lens lists the distinct prefix lengths that have a live prefix override,
-- longest first ("12,8,"); "#<len>" counts the prefixes of each length.
local function count(len, delta)
  local cf = '#' .. string.format('%d', len)
  local c = redis.call('HINCRBY', KEYS[1], cf, delta)
  if c <= 0 then
    redis.call('HDEL', KEYS[1], cf)
  end
  if not ((delta > 0 and c == 1) or (delta < 0 and c <= 0)) then
    return
  end
  local list = {}
  for l in string.gmatch(redis.call('HGET', KEYS[1], 'lens') or '', '%d+') do
    if tonumber(l) ~= len then
      list[#list + 1] = tonumber(l)
    end
  end
  if delta > 0 then
    list[#list + 1] = len
  end
  table.sort(list, function(x, y) return x > y end)
  local s = ''
  for _, l in ipairs(list) do
    s = s .. string.format('%d', l) .. ','
  end
  redis.call('HSET', KEYS[1], 'lens', s)
end

if op == 'set' then
  local val = ARGV[5] .. ' ' .. ARGV[6] .. ' ' .. ARGV[7] .. ' ' .. ARGV[8] .. ' ' .. ARGV[9]
  if shadow == '1' then val = val .. ' s' end
  if cur == val then
    return 3
  end
  redis.call('HSET', hash, field, val)
  if match == 'p' and not live then
    count(#key, 1)
  end
  if live then return 2 end
  return 1
end

-- del: a tombstone, so that a late "set" of this override stays refused.
if cur and not live and cid == oid and cver == ver then
  return 0
end
local t = redis.call('TIME')
redis.call('HSET', hash, field, 'd ' .. ARGV[5] .. ' ' .. ARGV[6] .. ' ' .. t[1])
if match == 'p' and live then
  count(#key, -1)
end
if live then return 1 end
return 0
