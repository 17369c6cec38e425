-- Fencing for the lock strategies (redis, zk): the largest lock token a product has accepted.
-- A lock holder first claims the fence with its token (accepted only if larger), and its stock
-- write applies only while the fence still holds its token; a holder whose lease ran out finds a
-- newer token there and writes nothing. An admin reset sets it back to 0.

-- +goose Up
ALTER TABLE products ADD COLUMN fence_token BIGINT UNSIGNED NOT NULL DEFAULT 0 AFTER per_user_limit;

-- +goose Down
ALTER TABLE products DROP COLUMN fence_token;
