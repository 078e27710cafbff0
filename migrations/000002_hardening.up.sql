-- Typed Casbin subjects: users are "user:NAME" and roles "role:NAME", so a
-- user named like a role can never stand for that role. Rows already typed
-- are left alone. The revision bump makes running consoles reload.
UPDATE casbin_rule SET v0 = CONCAT('role:', v0)
    WHERE ptype = 'p' AND v0 NOT LIKE 'role:%';
UPDATE casbin_rule SET v0 = CONCAT('user:', v0), v1 = CONCAT('role:', v1)
    WHERE ptype = 'g' AND v0 NOT LIKE 'user:%';
UPDATE policy_revision SET revision = revision + 1 WHERE id = 1;

-- Audit filters stay index-ordered at millions of rows: each filter, alone
-- or within one app (non-admins read per visible app), has an index that
-- ends in id, the order of every page. "at" serves time filters and the
-- retention purge.
-- actor_user is the actor without the channel ("alice" for "alice (api)"),
-- so that the actor filter is one index lookup.
ALTER TABLE audit_log ADD COLUMN actor_user VARCHAR(64) NOT NULL DEFAULT '' AFTER actor;
UPDATE audit_log SET actor_user = SUBSTRING_INDEX(actor, ' (', 1);
CREATE INDEX audit_log_actor_user ON audit_log (actor_user, id);
DROP INDEX audit_log_actor ON audit_log;
CREATE INDEX audit_log_action ON audit_log (action, id);
CREATE INDEX audit_log_type ON audit_log (object_type, id);
CREATE INDEX audit_log_app_action ON audit_log (app, action, id);
CREATE INDEX audit_log_app_type ON audit_log (app, object_type, id);
CREATE INDEX audit_log_app_actor ON audit_log (app, actor_user, id);
CREATE INDEX audit_log_at ON audit_log (at);

-- Sign-in throttle: failed attempts per user name and per client address,
-- kept as the time their allowance is used up to (generic cell rate
-- algorithm). The subject is a SHA-256 of the name or address.
CREATE TABLE signin_failures (
    scope   VARCHAR(8)  NOT NULL,
    subject CHAR(64)    NOT NULL,
    tat     DATETIME(6) NOT NULL,
    PRIMARY KEY (scope, subject),
    KEY signin_failures_tat (tat)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Devices that signed in successfully: a correct password from one of them
-- passes the per-user lock. Only the SHA-256 of the device secret is kept.
CREATE TABLE signin_devices (
    id           CHAR(64)    NOT NULL,
    username     VARCHAR(64) NOT NULL,
    created_at   DATETIME(6) NOT NULL,
    last_used_at DATETIME(6) NOT NULL,
    expires_at   DATETIME(6) NOT NULL,
    PRIMARY KEY (id),
    KEY signin_devices_user (username, last_used_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
