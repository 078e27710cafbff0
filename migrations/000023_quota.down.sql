ALTER TABLE buckets DROP COLUMN time_zone, DROP COLUMN quota_period;
