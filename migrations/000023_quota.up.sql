-- A quota's calendar period (hour, day, week, month) and the IANA time
-- zone its periods start in. Both are empty for the other kinds. An
-- override of a quota changes only its max_permits: the period is the
-- bucket's.
ALTER TABLE buckets ADD COLUMN quota_period VARCHAR(8) NOT NULL DEFAULT '' AFTER lease_ms;
ALTER TABLE buckets ADD COLUMN time_zone VARCHAR(64) NOT NULL DEFAULT '' AFTER quota_period;
