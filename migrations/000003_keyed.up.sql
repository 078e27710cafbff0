-- Keyed buckets: one definition whose token state exists per caller key.
-- Whether a bucket is keyed is fixed when it is created.
ALTER TABLE buckets ADD COLUMN keyed BOOLEAN NOT NULL DEFAULT FALSE;

-- Overrides: a different limit for one exact key or for every key starting
-- with a prefix, per keyed bucket. Keys are bytes (VARBINARY): compared and
-- ordered byte by byte, whatever their content. The unique key serves both
-- uniqueness and the paged, prefix-searched listing of one bucket's
-- overrides in key order.
CREATE TABLE bucket_overrides (
    id                  BIGINT         NOT NULL AUTO_INCREMENT,
    bucket_id           BIGINT         NOT NULL,
    match_kind          VARCHAR(8)     NOT NULL,
    override_key        VARBINARY(256) NOT NULL,
    description         VARCHAR(500)   NOT NULL DEFAULT '',
    max_permits         BIGINT         NOT NULL,
    rate_permits        DECIMAL(16,6)  NOT NULL,
    rate_period_seconds INT            NOT NULL,
    version             BIGINT         NOT NULL DEFAULT 1,
    created_by          VARCHAR(64)    NOT NULL,
    created_at          DATETIME(6)    NOT NULL,
    updated_by          VARCHAR(64)    NOT NULL,
    updated_at          DATETIME(6)    NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY bucket_overrides_key (bucket_id, override_key, match_kind),
    KEY bucket_overrides_kind (bucket_id, match_kind, id),
    CONSTRAINT bucket_overrides_bucket_fk FOREIGN KEY (bucket_id) REFERENCES buckets (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Change events of keyed buckets and of overrides travel in the same outbox
-- as every bucket change, so that the worker applies them in commit order.
ALTER TABLE bucket_events ADD COLUMN keyed BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE bucket_events ADD COLUMN override_id BIGINT NOT NULL DEFAULT 0;
ALTER TABLE bucket_events ADD COLUMN override_match VARCHAR(8) NOT NULL DEFAULT '';
ALTER TABLE bucket_events ADD COLUMN override_key VARBINARY(256) NOT NULL DEFAULT '';
