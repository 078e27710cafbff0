-- Accounts signed in through an OpenID Connect provider: the provider's
-- (issuer, subject) pair names the person for good, whatever their user
-- name or e-mail address becomes. Subjects are case-sensitive, hence _bin.
CREATE TABLE user_identities (
    issuer         VARCHAR(255) COLLATE utf8mb4_bin NOT NULL,
    subject        VARCHAR(255) COLLATE utf8mb4_bin NOT NULL,
    user_id        BIGINT       NOT NULL,
    created_at     DATETIME(6)  NOT NULL,
    last_signin_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (issuer, subject),
    KEY user_identities_user (user_id),
    CONSTRAINT user_identities_user FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- The roles the provider's groups gave (domain is an app, or '*' for the
-- admin role). A role listed here is the provider's to change at the next
-- sign-in; a role changed in the console leaves this list and stays.
CREATE TABLE idp_roles (
    username VARCHAR(64) NOT NULL,
    domain   VARCHAR(100) NOT NULL,
    role     VARCHAR(16) NOT NULL,
    PRIMARY KEY (username, domain)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
