-- The usage overview ranks buckets by what they refused or, in shadow mode,
-- would have refused: an index on the hour's would-deny total lets it walk
-- the top shadow buckets as it walks the top denying ones.
CREATE INDEX bucket_usage_would ON bucket_usage (would_total, bucket_name);
