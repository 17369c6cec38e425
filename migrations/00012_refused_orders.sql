-- The terminal `refused` order. A redis-lua purchase is answered 202 once the Lua script in Redis
-- accepts it; the persister writes it to MySQL later. When the Redis state went backwards (a
-- failover to a replica that had not copied the latest purchases), the script accepts purchases
-- MySQL cannot hold: no unit left for them, or a second one of a buyer. MySQL refuses them, and
-- each becomes an order of status `refused`, in the transaction that refuses it, so that its
-- buyer reads what happened under the order id of the 202 instead of a 404.
--
-- A refused order has no reservation (reservation_id NULL: it took no unit and holds no per-user
-- slot), is never charged, expired or returned (no expires_at, closed_at or returned_at), and the
-- consumer never makes one (it creates orders from reservations only).
--
--   refusal     why MySQL refused it, as the API's error code: sold_out (no unit left for it) or
--               limit_reached (the buyer holds a reservation of the product already)

-- +goose Up
ALTER TABLE orders
    MODIFY COLUMN reservation_id BIGINT UNSIGNED NULL,
    ADD COLUMN refusal VARCHAR(24) CHARACTER SET ascii COLLATE ascii_bin NULL AFTER status;

-- +goose Down
DELETE FROM orders WHERE reservation_id IS NULL;
ALTER TABLE orders
    DROP COLUMN refusal,
    MODIFY COLUMN reservation_id BIGINT UNSIGNED NOT NULL;
