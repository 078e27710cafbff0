DROP INDEX bucket_usage_near ON bucket_usage;
ALTER TABLE bucket_usage DROP COLUMN near_total;
ALTER TABLE bucket_usage DROP COLUMN would_total;
ALTER TABLE bucket_usage DROP COLUMN near_counts;
ALTER TABLE bucket_usage DROP COLUMN would_counts;
