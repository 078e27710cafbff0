CREATE TABLE users (
    id            BIGINT       NOT NULL AUTO_INCREMENT,
    username      VARCHAR(64)  NOT NULL,
    password_hash VARCHAR(255) NOT NULL,
    disabled      BOOLEAN      NOT NULL DEFAULT FALSE,
    created_at    DATETIME(6)  NOT NULL,
    updated_at    DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY users_username (username)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE apps (
    id          BIGINT       NOT NULL AUTO_INCREMENT,
    name        VARCHAR(63)  NOT NULL,
    description VARCHAR(500) NOT NULL DEFAULT '',
    version     BIGINT       NOT NULL DEFAULT 1,
    created_by  VARCHAR(64)  NOT NULL,
    created_at  DATETIME(6)  NOT NULL,
    updated_by  VARCHAR(64)  NOT NULL,
    updated_at  DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY apps_name (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE buckets (
    id                  BIGINT        NOT NULL AUTO_INCREMENT,
    name                VARCHAR(63)   NOT NULL,
    owner_app_id        BIGINT        NOT NULL,
    description         VARCHAR(500)  NOT NULL DEFAULT '',
    max_permits         BIGINT        NOT NULL,
    rate_permits        DECIMAL(16,6) NOT NULL,
    rate_period_seconds INT           NOT NULL,
    version             BIGINT        NOT NULL DEFAULT 1,
    created_by          VARCHAR(64)   NOT NULL,
    created_at          DATETIME(6)   NOT NULL,
    updated_by          VARCHAR(64)   NOT NULL,
    updated_at          DATETIME(6)   NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY buckets_name (name),
    KEY buckets_owner_app (owner_app_id),
    CONSTRAINT buckets_owner_app_fk FOREIGN KEY (owner_app_id) REFERENCES apps (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE bucket_apps (
    bucket_id BIGINT NOT NULL,
    app_id    BIGINT NOT NULL,
    PRIMARY KEY (bucket_id, app_id),
    KEY bucket_apps_app (app_id),
    CONSTRAINT bucket_apps_bucket_fk FOREIGN KEY (bucket_id) REFERENCES buckets (id) ON DELETE CASCADE,
    CONSTRAINT bucket_apps_app_fk FOREIGN KEY (app_id) REFERENCES apps (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Change events for the sync worker (transactional outbox). A row is written
-- in the same transaction as the bucket change it describes and carries the
-- whole definition, so the worker never has to read the bucket tables. Rows
-- are deleted once applied.
CREATE TABLE bucket_events (
    id                  BIGINT        NOT NULL AUTO_INCREMENT,
    bucket_id           BIGINT        NOT NULL,
    bucket_name         VARCHAR(63)   NOT NULL,
    op                  VARCHAR(16)   NOT NULL,
    version             BIGINT        NOT NULL,
    max_permits         BIGINT        NOT NULL,
    rate_permits        DECIMAL(16,6) NOT NULL,
    rate_period_seconds INT           NOT NULL,
    allowed_apps        TEXT          NOT NULL,
    created_at          DATETIME(6)   NOT NULL,
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE audit_log (
    id          BIGINT       NOT NULL AUTO_INCREMENT,
    at          DATETIME(6)  NOT NULL,
    actor       VARCHAR(64)  NOT NULL,
    action      VARCHAR(64)  NOT NULL,
    object_type VARCHAR(32)  NOT NULL,
    object_name VARCHAR(100) NOT NULL DEFAULT '',
    app         VARCHAR(63)  NOT NULL DEFAULT '',
    before_json MEDIUMTEXT   NULL,
    after_json  MEDIUMTEXT   NULL,
    remote_addr VARCHAR(64)  NOT NULL DEFAULT '',
    detail      VARCHAR(500) NOT NULL DEFAULT '',
    PRIMARY KEY (id),
    KEY audit_log_object (object_type, object_name, id),
    KEY audit_log_app (app, id),
    KEY audit_log_actor (actor, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Casbin policies and role assignments.
CREATE TABLE casbin_rule (
    id    BIGINT       NOT NULL AUTO_INCREMENT,
    ptype VARCHAR(16)  NOT NULL,
    v0    VARCHAR(100) NOT NULL DEFAULT '',
    v1    VARCHAR(100) NOT NULL DEFAULT '',
    v2    VARCHAR(100) NOT NULL DEFAULT '',
    v3    VARCHAR(100) NOT NULL DEFAULT '',
    v4    VARCHAR(100) NOT NULL DEFAULT '',
    v5    VARCHAR(100) NOT NULL DEFAULT '',
    PRIMARY KEY (id),
    UNIQUE KEY casbin_rule_unique (ptype, v0, v1, v2, v3, v4, v5)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- One row, bumped on every policy change, so that every console instance can
-- notice a change with one cheap query and reload.
CREATE TABLE policy_revision (
    id       INT    NOT NULL,
    revision BIGINT NOT NULL,
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

INSERT INTO policy_revision (id, revision) VALUES (1, 0);

CREATE TABLE sessions (
    id           CHAR(64)     NOT NULL,
    user_id      BIGINT       NOT NULL,
    created_at   DATETIME(6)  NOT NULL,
    last_seen_at DATETIME(6)  NOT NULL,
    expires_at   DATETIME(6)  NOT NULL,
    remote_addr  VARCHAR(64)  NOT NULL DEFAULT '',
    user_agent   VARCHAR(255) NOT NULL DEFAULT '',
    PRIMARY KEY (id),
    KEY sessions_user (user_id),
    CONSTRAINT sessions_user_fk FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE api_tokens (
    id           BIGINT       NOT NULL AUTO_INCREMENT,
    user_id      BIGINT       NOT NULL,
    name         VARCHAR(100) NOT NULL,
    prefix       VARCHAR(16)  NOT NULL,
    token_hash   CHAR(64)     NOT NULL,
    created_at   DATETIME(6)  NOT NULL,
    expires_at   DATETIME(6)  NULL,
    last_used_at DATETIME(6)  NULL,
    revoked_at   DATETIME(6)  NULL,
    PRIMARY KEY (id),
    UNIQUE KEY api_tokens_hash (token_hash),
    KEY api_tokens_user (user_id),
    CONSTRAINT api_tokens_user_fk FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
