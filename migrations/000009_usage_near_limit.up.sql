-- The roll-up of the last hour also keeps, per minute, the acquires that a
-- bucket in shadow mode would have denied and those that left a bucket
-- near its limit (at least 80% of its capacity in use), with their sums:
-- the console draws the first and lists buckets by the second. Rows
-- written before this migration read the new counts as zeros.
ALTER TABLE bucket_usage ADD COLUMN would_counts TEXT NULL;
ALTER TABLE bucket_usage ADD COLUMN near_counts TEXT NULL;
ALTER TABLE bucket_usage ADD COLUMN would_total BIGINT NOT NULL DEFAULT 0;
ALTER TABLE bucket_usage ADD COLUMN near_total BIGINT NOT NULL DEFAULT 0;
CREATE INDEX bucket_usage_near ON bucket_usage (near_total, bucket_name);
