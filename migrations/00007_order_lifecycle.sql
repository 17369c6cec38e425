-- Pay or release (issue #14). An order no longer ends at its creation: it waits for payment until
-- expires_at, then ends paid, expired or cancelled, and the units of an expired or cancelled order
-- go back on sale exactly once (returned_at).
--
-- Every change of an order's status is one conditional UPDATE on its row (`... WHERE status = ?`):
-- the payer's claim (confirmed → paying), the expirer's (confirmed → expired) and the buyer's
-- cancel (confirmed → cancelled) race on that one write, and exactly one of them wins.
--
--   status          confirmed: awaiting payment · paying: a payment claimed it and is at the
--                   provider · paid · expired · cancelled
--   expires_at      end of the payment window, set when the consumer creates the order
--   pay_key         the Idempotency-Key of the payment that claimed the order; pay_started_at when
--   payment_id      the provider's id of the successful charge
--   closed_at       when it expired or was cancelled
--   returned_at     when its units went back to the product's stock (through its strategy)

-- +goose Up
ALTER TABLE orders
    ADD COLUMN status         VARCHAR(12)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'confirmed' AFTER quantity,
    ADD COLUMN expires_at     DATETIME(6)  NULL AFTER created_at,
    ADD COLUMN pay_key        VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NULL,
    ADD COLUMN pay_started_at DATETIME(6)  NULL,
    ADD COLUMN paid_at        DATETIME(6)  NULL,
    ADD COLUMN payment_id     VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NULL,
    ADD COLUMN closed_at      DATETIME(6)  NULL,
    ADD COLUMN returned_at    DATETIME(6)  NULL,
    ADD KEY ix_orders_due (status, expires_at),
    ADD KEY ix_orders_unreturned (status, returned_at, product_id);
UPDATE orders SET expires_at = created_at + INTERVAL 10 MINUTE WHERE expires_at IS NULL;

-- The order events of the lifecycle (order.paid, order.expired, order.cancelled), written in the
-- transaction of the status change they report, and published to Kafka by the relay: the outbox of
-- everything after the order's creation (the reservation row stays the outbox of its creation).
-- One event of a kind per order: a transition happens once, so its event is written once.
CREATE TABLE order_events (
    id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    order_id     VARCHAR(40)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    product_id   BIGINT UNSIGNED NOT NULL,
    user_id      VARCHAR(64)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    kind         VARCHAR(24)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    quantity     INT             NOT NULL,
    created_at   DATETIME(6)     NOT NULL,
    published_at DATETIME(6)     NULL,
    claim_owner  VARCHAR(64)     CHARACTER SET ascii COLLATE ascii_bin NULL,
    claim_until  DATETIME(6)     NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uq_order_events_order_kind (order_id, kind),
    KEY ix_order_events_product (product_id),
    KEY ix_order_events_outbox (published_at, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- The simulated payment provider's own ledger (internal/payment): one row per charge attempt,
-- keyed by the provider's idempotency key, so that a retried charge returns the first outcome and
-- never charges twice. A real provider keeps this on its side; the simulation keeps it here so
-- that the audit can check that every successful charge is exactly one paid order.
CREATE TABLE payment_charges (
    charge_key   VARCHAR(180)    CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    charge_id    VARCHAR(64)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    order_id     VARCHAR(40)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    product_id   BIGINT UNSIGNED NOT NULL,
    amount_cents BIGINT          NOT NULL,
    outcome      VARCHAR(12)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    created_at   DATETIME(6)     NOT NULL,
    PRIMARY KEY (charge_key),
    UNIQUE KEY uq_payment_charges_id (charge_id),
    KEY ix_payment_charges_order (order_id),
    KEY ix_payment_charges_product (product_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE payment_charges;
DROP TABLE order_events;
ALTER TABLE orders
    DROP KEY ix_orders_unreturned,
    DROP KEY ix_orders_due,
    DROP COLUMN returned_at,
    DROP COLUMN closed_at,
    DROP COLUMN payment_id,
    DROP COLUMN paid_at,
    DROP COLUMN pay_started_at,
    DROP COLUMN pay_key,
    DROP COLUMN expires_at,
    DROP COLUMN status;
