-- Poison rows (issue #29). A background loop of the order pipeline that meets a row or a message
-- it can never get through (a value MySQL refuses, a message the broker refuses, bytes nothing
-- can decode) sets it aside here, once, and goes on with the others: retrying it for ever would
-- stall everything queued behind it. Nothing parked is lost or half done: an operator sees it
-- here, fixes what is wrong and replays it, or clears it (docs/order-pipeline.md).
--
-- The outboxes park in place: parked_at and park_error on the row, and the outbox index gains
-- parked_at after published_at, so the relays' claim (published_at IS NULL AND parked_at IS NULL
-- AND id >= ?) still walks only the entries waiting to be published, and an operator's list of
-- the parked ones (published_at IS NULL AND parked_at IS NOT NULL) is a range of the same index.

-- +goose Up
ALTER TABLE reservations
    ADD COLUMN parked_at  DATETIME(6)   NULL AFTER claim_until,
    ADD COLUMN park_error VARCHAR(1024) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL AFTER parked_at,
    DROP KEY ix_reservations_outbox,
    ADD KEY ix_reservations_outbox (published_at, parked_at, id);
ALTER TABLE order_events
    ADD COLUMN parked_at  DATETIME(6)   NULL AFTER claim_until,
    ADD COLUMN park_error VARCHAR(1024) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL AFTER parked_at,
    DROP KEY ix_order_events_outbox,
    ADD KEY ix_order_events_outbox (published_at, parked_at, id);

-- What a consumer of a Kafka topic, or the redis-lua persister reading a product's Redis stream,
-- could not apply: the message as it came (payload), where it came from, and why. One row per
-- message, or per reservation of a stream entry that holds several (position "<entry id>#<line>"):
-- a redelivery finds its row and parks nothing twice.
--
--   loop_name   consumer · event_consumer · persister
--   source      the topic, or the stream's key
--   position    "<partition>:<offset>", or the stream entry's id
--   order_id    the order the message names, when it names one this column can hold: where a
--               buyer's order, told 202, went (a later terminal state for it reads it here)
--   payload     the message's value; a stream entry's fields as a JSON object
CREATE TABLE parked_messages (
    id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    loop_name  VARCHAR(16)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    source     VARCHAR(255)    CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    position   VARCHAR(64)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    order_id   VARCHAR(40)     CHARACTER SET ascii COLLATE ascii_bin NULL,
    product_id BIGINT UNSIGNED NULL,
    payload    MEDIUMBLOB      NOT NULL,
    error      VARCHAR(1024)   CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    parked_at  DATETIME(6)     NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uq_parked_messages_position (loop_name, source, position),
    KEY ix_parked_messages_order (order_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE parked_messages;
ALTER TABLE order_events
    DROP KEY ix_order_events_outbox,
    ADD KEY ix_order_events_outbox (published_at, id),
    DROP COLUMN park_error,
    DROP COLUMN parked_at;
ALTER TABLE reservations
    DROP KEY ix_reservations_outbox,
    ADD KEY ix_reservations_outbox (published_at, id),
    DROP COLUMN park_error,
    DROP COLUMN parked_at;
