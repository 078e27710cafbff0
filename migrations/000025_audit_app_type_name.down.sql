DROP INDEX audit_log_app_type ON audit_log;
CREATE INDEX audit_log_app_type ON audit_log (app, object_type, id);
