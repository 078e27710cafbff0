ALTER TABLE bucket_events DROP COLUMN shadow;
ALTER TABLE buckets DROP COLUMN shadow;
