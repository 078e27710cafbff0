-- A member's audit log filtered on part of a bucket name, when many buckets
-- match, counts the entries about their apps' buckets whose name contains
-- it: this index holds app, object type and name together, so the count
-- reads the index alone instead of one row per entry of the apps.
CREATE INDEX audit_log_app_object ON audit_log (app, object_type, object_name, id);
