-- The packed limit (docs/protocol.md, "The packed limit"). The apply
-- script writes a bucket's limit a second time, in the field cfg, as eight
-- little-endian doubles: kind (0 token bucket, 1 quota, 2 concurrency),
-- capacity, permits in millionths, period, lease_ms, shadow (0 or 1),
-- reserve and slot_ms. The acquire reads it with the state in one HMGET
-- of four fields and one struct.unpack, where the fields cost seven more
-- lookups in the hash and their parsing. A hash without it (written by an
-- older worker, or on a server without the struct library) is read field
-- by field, with the same answers.
local PACKED, PACKED_LEN = '<dddddddd', 64

-- packed returns the packed limit of kind k ('bucket', 'quota' or
-- 'concurrency'), capacity c, permits p (a decimal), period d, lease_ms,
-- shadow ('0' or '1'), reserve r and slot_ms, or nil on a server without
-- the struct library.
local function packed(k, c, p, d, lease, shadow, r, slot_ms)
  local st = rawget(_G, 'struct')
  if not st then return nil end
  local code = 0
  if k == 'quota' then
    code = 1
  elseif k == 'concurrency' then
    code = 2
  end
  return st.pack(PACKED, code, tonumber(c), math.floor(tonumber(p) * 1000000 + 0.5), tonumber(d), tonumber(lease),
    tonumber(shadow), tonumber(r), tonumber(slot_ms))
end

-- unpacked returns the packed limit s as kind, capacity, permits in
-- millionths, period, lease_ms, shadow, reserve and slot_ms, or nil when s
-- is no packed limit that holds: a known kind, a whole capacity of at
-- least 1, and for a token bucket a rate.
local function unpacked(s)
  if type(s) ~= 'string' or #s ~= PACKED_LEN then return nil end
  local k, c, pm, d, lease, shadow, r, ms = struct.unpack(PACKED, s)
  if c < 1 or c % 1 ~= 0 or (k ~= 0 and k ~= 1 and k ~= 2) or (k == 0 and (pm <= 0 or d < 1)) then return nil end
  return k, c, pm, d, lease, shadow, r, ms
end
