-- The purchase path: products on sale, reservations (the outbox), orders, idempotency keys.
--
-- Identifiers that users or the app choose (user ids, order ids, idempotency keys) are ASCII with a
-- binary collation: "U1" and "u1" are two users, and a case-insensitive collation would make them
-- collide in the unique indexes below.

-- +goose Up
CREATE TABLE products (
    id             BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    name           VARCHAR(200)    NOT NULL,
    price_cents    BIGINT          NOT NULL,
    -- Signed on purpose, and without a CHECK: the unsafe strategy `none` exists to show an oversell,
    -- and the audit must be able to see it rather than have the schema hide it.
    stock          INT             NOT NULL,
    initial_stock  INT             NOT NULL,
    strategy       VARCHAR(16)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    sale_starts_at DATETIME(6)     NOT NULL,
    sale_ends_at   DATETIME(6)     NOT NULL,
    per_user_limit INT             NOT NULL DEFAULT 1,
    created_at     DATETIME(6)     NOT NULL,
    updated_at     DATETIME(6)     NOT NULL,
    PRIMARY KEY (id),
    KEY ix_products_name (name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- One row per accepted purchase, written in the same transaction as the stock deduction. It is the
-- outbox the relay publishes to Kafka from (published_at, claim_*) and, through its unique
-- (product_id, user_id), the anti-duplicate table. No foreign key to products: the check would take
-- a shared lock on the hottest row of the sale inside every purchase.
CREATE TABLE reservations (
    id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    order_id     VARCHAR(40)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    product_id   BIGINT UNSIGNED NOT NULL,
    user_id      VARCHAR(64)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    quantity     INT             NOT NULL,
    strategy     VARCHAR(16)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    created_at   DATETIME(6)     NOT NULL,
    published_at DATETIME(6)     NULL,
    claim_owner  VARCHAR(64)     CHARACTER SET ascii COLLATE ascii_bin NULL,
    claim_until  DATETIME(6)     NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uq_reservations_order (order_id),
    UNIQUE KEY uq_reservations_product_user (product_id, user_id),
    KEY ix_reservations_outbox (published_at, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- Orders are created by the Kafka consumer from the reservation the event names, never from the
-- event's own fields. The unique order_id makes redelivery harmless; the foreign key makes an order
-- without its reservation impossible (an admin reset deletes both).
CREATE TABLE orders (
    id             BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    order_id       VARCHAR(40)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    reservation_id BIGINT UNSIGNED NOT NULL,
    product_id     BIGINT UNSIGNED NOT NULL,
    user_id        VARCHAR(64)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    quantity       INT             NOT NULL,
    created_at     DATETIME(6)     NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uq_orders_order (order_id),
    UNIQUE KEY uq_orders_reservation (reservation_id),
    KEY ix_orders_product (product_id),
    CONSTRAINT fk_orders_reservation FOREIGN KEY (reservation_id)
        REFERENCES reservations (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- The first accepted answer to a purchase that carried an Idempotency-Key, scoped per user. Written
-- in the purchase transaction, so a key exists exactly when its reservation does.
CREATE TABLE idempotency_keys (
    user_id    VARCHAR(64)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    idem_key   VARCHAR(128)    CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    product_id BIGINT UNSIGNED NOT NULL,
    quantity   INT             NOT NULL,
    order_id   VARCHAR(40)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    strategy   VARCHAR(16)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    created_at DATETIME(6)     NOT NULL,
    PRIMARY KEY (user_id, idem_key),
    KEY ix_idempotency_product (product_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE idempotency_keys;
DROP TABLE orders;
DROP TABLE reservations;
DROP TABLE products;
