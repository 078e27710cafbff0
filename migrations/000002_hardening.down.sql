DROP TABLE signin_devices;
DROP TABLE signin_failures;

DROP INDEX audit_log_at ON audit_log;
DROP INDEX audit_log_app_actor ON audit_log;
DROP INDEX audit_log_app_type ON audit_log;
DROP INDEX audit_log_app_action ON audit_log;
DROP INDEX audit_log_type ON audit_log;
DROP INDEX audit_log_action ON audit_log;
CREATE INDEX audit_log_actor ON audit_log (actor, id);
DROP INDEX audit_log_actor_user ON audit_log;
ALTER TABLE audit_log DROP COLUMN actor_user;

-- Both prefixes are five characters long.
UPDATE casbin_rule SET v0 = SUBSTRING(v0, 6), v1 = SUBSTRING(v1, 6)
    WHERE ptype = 'g' AND v0 LIKE 'user:%' AND v1 LIKE 'role:%';
UPDATE casbin_rule SET v0 = SUBSTRING(v0, 6)
    WHERE ptype = 'p' AND v0 LIKE 'role:%';
UPDATE policy_revision SET revision = revision + 1 WHERE id = 1;
