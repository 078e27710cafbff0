ALTER TABLE buckets DROP COLUMN time_zone;
ALTER TABLE buckets DROP COLUMN quota_period;
