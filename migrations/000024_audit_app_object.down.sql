DROP INDEX audit_log_app_object ON audit_log;
