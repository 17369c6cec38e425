-- What the consumer of the lifecycle topic makes of the order events (order.paid, order.expired,
-- order.cancelled): units per product and kind. It stands for any downstream service that reacts to
-- them, and shows how such a consumer stays idempotent over an at-least-once topic: the ids of the
-- events it has counted and the counters are written in one transaction, so an event delivered
-- again (a relay that republished, a consumer that died before committing its offsets) is found
-- among the consumed ids and counts nothing.

-- +goose Up
-- One row per event counted, with what it counted. batch_token is a random number per consuming
-- transaction: the rows that carry it are the ones that transaction inserted (INSERT IGNORE skips
-- the ids counted already), which the counters are then increased by.
CREATE TABLE order_events_consumed (
    event_id    BIGINT UNSIGNED NOT NULL,
    product_id  BIGINT UNSIGNED NOT NULL,
    kind        VARCHAR(24)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    quantity    INT             NOT NULL,
    batch_token BIGINT UNSIGNED NOT NULL,
    consumed_at DATETIME(6)     NOT NULL,
    PRIMARY KEY (event_id),
    KEY ix_order_events_consumed_product (product_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

CREATE TABLE order_event_tallies (
    product_id      BIGINT UNSIGNED NOT NULL,
    paid_units      BIGINT          NOT NULL DEFAULT 0,
    expired_units   BIGINT          NOT NULL DEFAULT 0,
    cancelled_units BIGINT          NOT NULL DEFAULT 0,
    events          BIGINT          NOT NULL DEFAULT 0,
    updated_at      DATETIME(6)     NOT NULL,
    PRIMARY KEY (product_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE order_event_tallies;
DROP TABLE order_events_consumed;
