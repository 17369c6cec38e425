-- Whether the storefront shows the product. The load test and the bench put products on sale to
-- measure them, and those should not fill the shop's page; the API still serves any product by
-- id, and the admin list shows them all.

-- +goose Up
ALTER TABLE products ADD COLUMN listed BOOLEAN NOT NULL DEFAULT TRUE AFTER per_user_limit;

-- +goose Down
ALTER TABLE products DROP COLUMN listed;
