-- A purchase's trace crosses the outbox (issue #33): a reservation keeps the W3C traceparent of
-- the purchase's request, for the relay to put in the Kafka message's headers and the consumer to
-- continue the trace; an order event keeps the traceparent of the lifecycle change that wrote it
-- (a pay or cancel request's, or an expiry's in the purchase's trace), for the event relay. NULL when tracing is off or the request was not sampled, which is every row
-- written before this migration: a nullable column added last costs existing rows nothing, and
-- the purchase path writes it only when it has one (docs/order-pipeline.md). A traceparent of
-- version 00 is 55 ASCII characters.

-- +goose Up
ALTER TABLE reservations
    ADD COLUMN trace_parent VARCHAR(55) CHARACTER SET ascii COLLATE ascii_bin NULL;
ALTER TABLE order_events
    ADD COLUMN trace_parent VARCHAR(55) CHARACTER SET ascii COLLATE ascii_bin NULL;

-- +goose Down
ALTER TABLE order_events
    DROP COLUMN trace_parent;
ALTER TABLE reservations
    DROP COLUMN trace_parent;
