
-- The quota part of the core (docs/protocol.md, "Quotas"): a quota counts
-- what it granted in each calendar period and grants at most its quota per
-- period. Lua has no time zones: the periods are the instants of the
-- table `bounds` (Unix seconds, 10 digits each, ascending) that the sync
-- worker computes and writes, and the script only finds Redis's TIME in
-- it. A count is kept with the start of its period, so that a count of
-- another period reads as 0: the reset is exact.

-- kind_limit checks a stored limit of kind k (absent: a token bucket) and
-- returns capacity, permits in millionths and period, or nil: a token
-- bucket's as limit_of reads it; a quota's (or another kind's that counts
-- rather than refills) is its capacity, the quota, with permits and
-- period 0.
local function kind_limit(k, c, p, d)
  if not k or k == 'bucket' then return limit_of(c, p, d) end
  local q = tonumber(c)
  if not q or q < 1 or q % 1 ~= 0 then return nil end
  return q, 0, 0
end

-- period_of finds the period of the table b containing now (µs): its
-- start and end in Unix seconds, or nil when b is no table or does not
-- cover now. Entries are 10 characters each, so any one is read without
-- splitting the table, and a bisection reads a handful.
local function period_of(b, now)
  if type(b) ~= 'string' or #b < 20 or #b % 10 ~= 0 then return nil end
  local lo, hi = tonumber(string.sub(b, 1, 10)), tonumber(string.sub(b, -10))
  if not lo or not hi or now < lo * 1000000 or now >= hi * 1000000 then return nil end
  local i, j = 1, #b / 10
  while j - i > 1 do
    local m = math.floor((i + j) / 2)
    local v = tonumber(string.sub(b, m * 10 - 9, m * 10))
    if not v then return nil end
    if v * 1000000 <= now then
      i, lo = m, v
    else
      j, hi = m, v
    end
  end
  return lo, hi
end

-- counted returns the period [s, e) of a quota's stored count used and
-- that count, when its stored period (start ps, end pe, Unix seconds)
-- holds now (µs), else nil: the acquire then finds the period in the
-- table. The apply script forgets pe (writes 0) whenever the table may
-- have changed, so a stored period is always one of the table's.
local function counted(used, ps, pe, now)
  ps, pe = tonumber(ps), tonumber(pe)
  if not ps or not pe or now < ps * 1000000 or now >= pe * 1000000 then return nil end
  return ps, pe, tonumber(used) or 0
end

-- quota_take answers a request of n (1 <= n <= q) from a quota of q that
-- counted used in the period [s, e) at now: the new count (nil when
-- nothing is counted) and the answer of seven integers (then x8, x9, x10):
-- code, the whole requests left this period, the wait (a denial: until
-- the period ends, when n fits again), the time until the count resets,
-- q, 0 (a quota has no rate) and the period's length in seconds. The
-- code is 1 allowed when used + n <= q, else 0 denied, or 2 would deny in
-- shadow mode.
local function quota_take(q, used, n, s, e, now, shadow, x8, x9, x10)
  local reset = us(e * 1000000 - now)
  if used + n <= q then
    used = used + n
    return used, {1, q - used, 0, reset, q, 0, e - s, x8, x9, x10}
  end
  local code = 0
  if shadow then code = 2 end
  local rem = q - used
  if rem < 0 then rem = 0 end
  return nil, {code, rem, reset, reset, q, 0, e - s, x8, x9, x10}
end
