-- The copied columns come back empty: drain the outbox (stop the console,
-- let the sync worker finish) before migrating down.
ALTER TABLE bucket_events ADD COLUMN max_permits BIGINT NOT NULL DEFAULT 0;
ALTER TABLE bucket_events ADD COLUMN rate_permits DECIMAL(16,6) NOT NULL DEFAULT 0;
ALTER TABLE bucket_events ADD COLUMN rate_period_seconds INT NOT NULL DEFAULT 0;
ALTER TABLE bucket_events ADD COLUMN allowed_apps TEXT NOT NULL;
ALTER TABLE bucket_events ADD COLUMN shadow TINYINT(1) NOT NULL DEFAULT 0;
ALTER TABLE bucket_events ADD COLUMN lease_ms INT NOT NULL DEFAULT 0;
