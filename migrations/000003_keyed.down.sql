ALTER TABLE bucket_events DROP COLUMN override_key;
ALTER TABLE bucket_events DROP COLUMN override_match;
ALTER TABLE bucket_events DROP COLUMN override_id;
ALTER TABLE bucket_events DROP COLUMN keyed;
DROP TABLE IF EXISTS bucket_overrides;
ALTER TABLE buckets DROP COLUMN keyed;
