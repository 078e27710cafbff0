-- The state of a token bucket (docs/protocol.md, "The bucket state"): its
-- tokens and the time of their last refill (ts, microseconds of Redis
-- TIME). A hash keeps it in one of two forms, and every script writes it
-- back in the form it found:
--   binary: the field st, two little-endian doubles (tokens, then ts):
--           one field to find and to write, nothing to parse or print;
--   decimal: the fields tokens ('%.17g') and ts ('%d'), which clients of
--           releases before the binary form read and write.
-- Only the apply script picks the form (the sync worker's state format)
-- and moves a bucket from one to the other. A server without the struct
-- library keeps the decimal form.
local STATE, STATE_LEN = '<dd', 16

-- stored returns the tokens and ts of a hash whose fields st, tokens and
-- ts hold st, tokens and ts, and whether they are in the binary form: the
-- binary form's when st holds one, else the decimal fields (refill reads
-- them; absent is a full bucket).
local function stored(st, tokens, ts)
  if type(st) == 'string' and #st == STATE_LEN then
    local t, s = struct.unpack(STATE, st)
    return t, s, true
  end
  return tokens, ts, false
end

-- state_of is stored for the hash key whose field st read st, reading the
-- decimal fields only when st holds no binary state: the acquire asks for
-- st alone, the common case.
local function state_of(key, st)
  local t, s, binary = stored(st)
  if binary then return t, s, true end
  local d = redis.call('HMGET', key, 'tokens', 'ts')
  return d[1], d[2], false
end

-- decimal prints a count of tokens: a whole count prints the same with
-- '%d' as with '%.17g', and faster.
local function decimal(tokens)
  if math.floor(tokens) == tokens then return string.format('%d', tokens) end
  return string.format('%.17g', tokens)
end

-- state_fields appends to the command c the fields and values of a state
-- of tokens at ts, in the binary form or the decimal one.
local function state_fields(c, tokens, ts, binary)
  if binary then
    c[#c + 1], c[#c + 2] = 'st', struct.pack(STATE, tokens, ts)
  else
    c[#c + 1], c[#c + 2], c[#c + 3], c[#c + 4] = 'tokens', decimal(tokens), 'ts', string.format('%d', ts)
  end
  return c
end

-- put writes a bucket's tokens and ts in the form binary says.
local function put(key, tokens, ts, binary)
  if binary then
    redis.call('HSET', key, 'st', struct.pack(STATE, tokens, ts))
  else
    redis.call('HSET', key, 'tokens', decimal(tokens), 'ts', string.format('%d', ts))
  end
end
