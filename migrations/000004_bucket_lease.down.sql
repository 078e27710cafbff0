ALTER TABLE bucket_events DROP COLUMN lease_ms;
ALTER TABLE buckets DROP COLUMN lease_ms;
