-- The checkout's background loops (issue #29): the expirer, the settlement of stuck payments and
-- the returns each work through orders in batches, and one order they cannot handle (a row that
-- fails for a reason no retry cures) must not stop them for everybody else. Such an order is
-- parked: parked_at and park_error say when and why, every loop skips it, a metric counts it and
-- the log names it once. An operator clears parked_at to have the loops take it again.
--
-- The returns read what is due per product, oldest closed first (fair across products, not one
-- product after the other): ix_orders_return_due serves both that read and the per-product
-- existence probe that lists the products with units to return. It replaces
-- ix_orders_unreturned, whose (status, …) prefix made "the oldest of one product" a sort of
-- every due order.

-- +goose Up
ALTER TABLE orders
    ADD COLUMN parked_at  DATETIME(6)  NULL,
    ADD COLUMN park_error VARCHAR(255) NULL,
    DROP KEY ix_orders_unreturned,
    ADD KEY ix_orders_return_due (product_id, returned_at, closed_at);

-- +goose Down
ALTER TABLE orders
    DROP KEY ix_orders_return_due,
    ADD KEY ix_orders_unreturned (status, returned_at, product_id),
    DROP COLUMN park_error,
    DROP COLUMN parked_at;
