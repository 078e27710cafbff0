-- Shadow mode per override: its keys are decided and counted but never refused.
ALTER TABLE bucket_overrides ADD COLUMN shadow TINYINT(1) NOT NULL DEFAULT 0;
