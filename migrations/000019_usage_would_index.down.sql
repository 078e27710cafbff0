DROP INDEX bucket_usage_would ON bucket_usage;
