-- Lease mode per bucket: how long a client may hand out a batch of leased
-- tokens, in milliseconds; 0 is off (the default).
ALTER TABLE buckets ADD COLUMN lease_ms INT NOT NULL DEFAULT 0;
ALTER TABLE bucket_events ADD COLUMN lease_ms INT NOT NULL DEFAULT 0;
