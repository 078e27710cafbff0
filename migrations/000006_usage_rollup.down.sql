DROP TABLE usage_rollup_cursor;
DROP TABLE bucket_usage;
