-- Descriptor mappings of the decision service: per calling app, an Envoy
-- rate limit domain and a list of descriptor entries name a bucket (and
-- optionally which entry's value is the key of a keyed bucket).
CREATE TABLE descriptor_mappings (
    id          BIGINT        NOT NULL AUTO_INCREMENT,
    app_id      BIGINT        NOT NULL,
    domain      VARCHAR(255)  NOT NULL,
    entries     TEXT          NOT NULL,
    match_hash  CHAR(64)      NOT NULL,
    bucket      VARCHAR(63)   NOT NULL,
    key_from    VARCHAR(255)  NOT NULL DEFAULT '',
    description VARCHAR(500)  NOT NULL DEFAULT '',
    version     BIGINT        NOT NULL DEFAULT 1,
    created_by  VARCHAR(64)   NOT NULL,
    created_at  DATETIME(6)   NOT NULL,
    updated_by  VARCHAR(64)   NOT NULL,
    updated_at  DATETIME(6)   NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY descriptor_mappings_match (app_id, match_hash),
    CONSTRAINT descriptor_mappings_app_fk FOREIGN KEY (app_id) REFERENCES apps (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Credentials of calling apps: each token acts as one app and may only
-- acquire. Only a SHA-256 digest of the secret is kept.
CREATE TABLE app_tokens (
    id          BIGINT        NOT NULL AUTO_INCREMENT,
    app_id      BIGINT        NOT NULL,
    name        VARCHAR(100)  NOT NULL,
    scope       VARCHAR(16)   NOT NULL,
    prefix      VARCHAR(16)   NOT NULL,
    token_hash  CHAR(64)      NOT NULL,
    created_by  VARCHAR(64)   NOT NULL,
    created_at  DATETIME(6)   NOT NULL,
    expires_at  DATETIME(6)   NULL,
    revoked_at  DATETIME(6)   NULL,
    PRIMARY KEY (id),
    UNIQUE KEY app_tokens_hash (token_hash),
    KEY app_tokens_app (app_id),
    CONSTRAINT app_tokens_app_fk FOREIGN KEY (app_id) REFERENCES apps (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- One row, bumped in the same transaction as every change of the two tables
-- above, so that decision services notice a change with one cheap query.
CREATE TABLE decision_revision (
    id       INT    NOT NULL,
    revision BIGINT NOT NULL,
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

INSERT INTO decision_revision (id, revision) VALUES (1, 0);
