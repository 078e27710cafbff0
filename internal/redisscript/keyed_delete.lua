-- Sluice keyed delete: remove one key group of a keyed bucket (its config
-- and overrides) unless it holds a newer incarnation, and remember the
-- deleted id in the group's tombstone. KEYS[1] group hash, KEYS[2] tombstone.
-- ARGV: id, version, ttl. Returns 1 when the group was deleted, else 0.
-- Key states are left to expire: they carry the id, so a recreated bucket
-- ignores them.
local id = tonumber(ARGV[1])
local ttl = tonumber(ARGV[3])
if not id or not ttl or ttl < 1 then
  return redis.error_reply('ERR sluice keyed delete: invalid arguments')
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
