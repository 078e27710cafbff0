ALTER TABLE buckets DROP COLUMN reserve;
