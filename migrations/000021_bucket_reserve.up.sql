-- Reserve per bucket: tokens only requests marked critical may take; every
-- other request is refused when taking its tokens would leave fewer. A
-- count of permits, 0 (none, the default) to max_permits - 1. Overrides of
-- keyed buckets have no column of their own: their keys keep the bucket's
-- share of the override's capacity (docs/decisions.md).
ALTER TABLE buckets ADD COLUMN reserve BIGINT NOT NULL DEFAULT 0;
