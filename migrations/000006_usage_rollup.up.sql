-- The last hour of every bucket's usage, rolled up by the sync worker from
-- the per-minute counts in Redis, so that the console's bucket list and
-- usage overview read MySQL at a constant cost per page and never scan
-- Redis. One row per bucket name that had usage in the last hour; the
-- per-minute counts are comma-separated, oldest first, the last one being
-- the minute last_minute (Unix seconds / 60).
CREATE TABLE bucket_usage (
    bucket_name    VARCHAR(63) NOT NULL,
    last_minute    BIGINT      NOT NULL,
    allowed_counts TEXT        NOT NULL,
    denied_counts  TEXT        NOT NULL,
    allowed_total  BIGINT      NOT NULL,
    denied_total   BIGINT      NOT NULL,
    PRIMARY KEY (bucket_name),
    KEY bucket_usage_denied (denied_total, bucket_name),
    KEY bucket_usage_last (last_minute)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- The last minute rolled up, one row shared by every sync worker.
CREATE TABLE usage_rollup_cursor (
    id     INT    NOT NULL,
    minute BIGINT NOT NULL,
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

INSERT INTO usage_rollup_cursor (id, minute) VALUES (1, 0);
