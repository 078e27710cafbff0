-- Shadow mode: a bucket that decides and counts but never refuses.
ALTER TABLE buckets ADD COLUMN shadow TINYINT(1) NOT NULL DEFAULT 0;
ALTER TABLE bucket_events ADD COLUMN shadow TINYINT(1) NOT NULL DEFAULT 0;
