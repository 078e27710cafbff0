ALTER TABLE buckets DROP COLUMN slot_ms;
