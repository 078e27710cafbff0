-- Sign-ins through the provider under way: one row per redirect, taken
-- (deleted) by the callback, so a state is good once, for ten minutes, and
-- only in the browser that holds the cookie whose digest is browser.
CREATE TABLE oidc_logins (
    state      CHAR(64)     NOT NULL,
    browser    CHAR(64)     NOT NULL,
    nonce      VARCHAR(64)  NOT NULL,
    verifier   VARCHAR(128) NOT NULL,
    next_path  VARCHAR(512) NOT NULL,
    created_at DATETIME(6)  NOT NULL,
    expires_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (state),
    KEY oidc_logins_expires (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
