ALTER TABLE bucket_overrides DROP COLUMN shadow;
