-- A change event names what changed instead of copying it: the bucket (id,
-- name, version, keyed) or the override (id, version, and the match and key
-- its removal needs once the row is gone). The sync worker reads the
-- current definition when it applies an event, so a field added to a
-- bucket needs no column here. Pending events stay valid: the columns kept
-- are the reference.
ALTER TABLE bucket_events DROP COLUMN max_permits;
ALTER TABLE bucket_events DROP COLUMN rate_permits;
ALTER TABLE bucket_events DROP COLUMN rate_period_seconds;
ALTER TABLE bucket_events DROP COLUMN allowed_apps;
ALTER TABLE bucket_events DROP COLUMN shadow;
ALTER TABLE bucket_events DROP COLUMN lease_ms;
