-- Sluice delete: remove a bucket hash (or one key group of a keyed bucket:
-- its config and overrides) unless it holds a newer incarnation, and
-- remember the deleted id in a tombstone so stale events cannot bring it
-- back. KEYS[1] bucket or group hash, KEYS[2] its tombstone; ARGV: id,
-- version, ttl. Returns 1 when the hash was deleted, else 0. A keyed
-- bucket's key states are left to expire: they carry the id, so a
-- recreated bucket ignores them.

-- id 0 deletes only a hash without a valid id (garbage the reconcile removes).
local id = int_arg(ARGV[1], 0, MAX_INT)
if not id then return redis.error_reply('ERR sluice delete: invalid id') end
if not int_arg(ARGV[2], 0, MAX_INT) then return redis.error_reply('ERR sluice delete: invalid version') end
local ttl = int_arg(ARGV[3], 1, 31536000)
if not ttl then return redis.error_reply('ERR sluice delete: invalid ttl') end
local deleted = 0
local cid = tonumber(redis.call('HGET', KEYS[1], 'id'))
if not cid or cid <= id then
  deleted = redis.call('DEL', KEYS[1])
end
local tomb = tonumber(redis.call('GET', KEYS[2]))
if tomb and tomb > id then
  id = tomb
end
redis.call('SET', KEYS[2], string.format('%d', id), 'EX', ttl)
return deleted
