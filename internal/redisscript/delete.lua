-- Sluice delete: remove a bucket hash unless it holds a newer incarnation,
-- and remember the deleted id in a tombstone so stale events cannot bring
-- it back. KEYS[1] bucket hash, KEYS[2] tombstone; ARGV: id, version, ttl.
-- Returns 1 when the hash was deleted, else 0.
local id = tonumber(ARGV[1])
local ttl = tonumber(ARGV[3])
if not id or not ttl or ttl < 1 then
  return redis.error_reply('ERR sluice delete: invalid arguments')
end
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
