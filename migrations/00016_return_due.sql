-- Returns owed, per product (issue #34): every replica's returner asks each second which products
-- have closed orders whose units are not back yet. It asked every product (one probe of
-- ix_orders_return_due each), a cost that grew with the products table; it now asks only those
-- marked here. A transaction that makes an order due for a return (an expiry, a cancel) marks the
-- order's product in the same transaction (owing = TRUE, seq + 1); the returner probes the marked
-- products and unmarks one whose probe found nothing due, only if its seq has not moved since it
-- read it (internal/store/return_due.go says why nothing is lost). A row is never deleted, so a
-- product's seq never goes back: it is one row per product that ever had an order closed, and the
-- returner reads the range owing = TRUE of ix_return_due_owing, the products that may owe.
--
-- No foreign key to products: the check would take a shared lock on the product's row, the
-- hottest row of a mysql sale, in every cancel and expiry.
--
-- The orders due now are marked here, so that the upgrade loses none. Each statement may run
-- again (a migration cut between the two: MySQL commits a CREATE TABLE on its own).

-- +goose Up
CREATE TABLE IF NOT EXISTS return_due (
    product_id BIGINT UNSIGNED NOT NULL,
    seq        BIGINT UNSIGNED NOT NULL,
    owing      BOOLEAN         NOT NULL,
    PRIMARY KEY (product_id),
    KEY ix_return_due_owing (owing)
) ENGINE = InnoDB;
INSERT INTO return_due (product_id, seq, owing)
SELECT DISTINCT product_id, 1, TRUE FROM orders FORCE INDEX (ix_orders_return_due)
WHERE returned_at IS NULL AND closed_at IS NOT NULL AND parked_at IS NULL
ON DUPLICATE KEY UPDATE seq = seq + 1, owing = TRUE;

-- +goose Down
DROP TABLE return_due;
