-- Sale epochs: every admin reset of a product starts a new sale (purchases cleared, rules possibly
-- changed) and adds one to sale_epoch. Replicas keep a product's sale rules in memory; a purchase
-- carries the epoch it was admitted in, and its stock write applies only while the product is
-- still in that epoch, so rules cached a moment too long can refuse a purchase but never let one
-- into a sale whose rules are gone.

-- +goose Up
ALTER TABLE products ADD COLUMN sale_epoch BIGINT UNSIGNED NOT NULL DEFAULT 1 AFTER fence_token;

-- +goose Down
ALTER TABLE products DROP COLUMN sale_epoch;
