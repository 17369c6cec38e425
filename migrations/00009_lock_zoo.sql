-- The lock zoo (every lock mechanism of the classic write-ups as a strategy of its own) brings
-- strategy names longer than 16 characters, and the optimistic lock's version number.
--
-- products.version is read with the stock by the mysql-version strategies and advanced by each
-- of their writes (`UPDATE … SET stock = ?, version = version + 1 WHERE id = ? AND version = ?`):
-- a write that finds another version lost the race and runs again. The other strategies leave it
-- alone; it starts at 0 with every sale.

-- +goose Up
ALTER TABLE products
    MODIFY COLUMN strategy VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    ADD COLUMN version BIGINT UNSIGNED NOT NULL DEFAULT 0 AFTER stock;
ALTER TABLE reservations
    MODIFY COLUMN strategy VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL;

-- +goose Down
ALTER TABLE reservations
    MODIFY COLUMN strategy VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL;
ALTER TABLE products
    DROP COLUMN version,
    MODIFY COLUMN strategy VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL;
