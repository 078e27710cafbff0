-- What a limit counts: "bucket" (a token bucket, every limit so far),
-- "concurrency" (calls in progress) or "quota" (calls per calendar
-- period). Only a token bucket refills, so the other kinds store a zero
-- rate.
ALTER TABLE buckets ADD COLUMN kind VARCHAR(16) NOT NULL DEFAULT 'bucket' AFTER owner_app_id;
