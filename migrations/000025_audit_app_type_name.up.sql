-- A member's audit log filtered on part of a bucket name, when many buckets
-- match, walks each app's bucket entries newest first and keeps those whose
-- name contains the text. With the name in this index, beside the id whose
-- order the walk follows, the test reads the index alone: a page of 50 read
-- about 5,000 whole rows (before and after snapshots included) for 10 apps.
DROP INDEX audit_log_app_type ON audit_log;
CREATE INDEX audit_log_app_type ON audit_log (app, object_type, id, object_name);
