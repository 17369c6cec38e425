-- A sale's admission rule (issue #32): open, or a waiting room with its settings. Every existing
-- product is open, and an open product's numbers are zero: it has none. Durations are in whole
-- seconds, as the API speaks them; admission_queue_opens_at is NULL when the queue opens with the
-- sale (no pre-queue).

-- +goose Up
ALTER TABLE products
    ADD COLUMN admission_mode            VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'open' AFTER listed,
    ADD COLUMN admission_admit_rate      DOUBLE      NOT NULL DEFAULT 0 AFTER admission_mode,
    ADD COLUMN admission_max_active      INT         NOT NULL DEFAULT 0 AFTER admission_admit_rate,
    ADD COLUMN admission_session_seconds INT         NOT NULL DEFAULT 0 AFTER admission_max_active,
    ADD COLUMN admission_queue_opens_at  DATETIME(6) NULL AFTER admission_session_seconds,
    ADD COLUMN admission_shuffle         BOOLEAN     NOT NULL DEFAULT FALSE AFTER admission_queue_opens_at,
    ADD COLUMN admission_abandon_seconds INT         NOT NULL DEFAULT 0 AFTER admission_shuffle;

-- +goose Down
ALTER TABLE products
    DROP COLUMN admission_abandon_seconds,
    DROP COLUMN admission_shuffle,
    DROP COLUMN admission_queue_opens_at,
    DROP COLUMN admission_session_seconds,
    DROP COLUMN admission_max_active,
    DROP COLUMN admission_admit_rate,
    DROP COLUMN admission_mode;
