-- The slot lease time of a concurrency limit, in milliseconds: a slot
-- neither released nor renewed expires that long after it was taken or
-- last renewed. 0 for the other kinds. Not lease_ms, the batch token
-- leases of a token bucket in lease mode.
ALTER TABLE buckets ADD COLUMN slot_ms INT NOT NULL DEFAULT 0;
