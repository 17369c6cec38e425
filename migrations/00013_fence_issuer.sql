-- Fences that survive a new ZooKeeper ensemble: a fence is the pair (fence_issuer, fence_token).
-- ZooKeeper's tokens (czxids) count from the ensemble's data; an ensemble whose data was wiped
-- counts from zero again, below every fence MySQL kept. Each lease now names the data that
-- counted its token (its issuer: the identity of the ensemble's data), lock_issuers numbers the
-- issuers in the order this database first saw them, and a claim from a later issuer moves the
-- fence onto it whatever its token; a claim or write of an earlier issuer is refused from then on
-- (docs/locks.md). 0 is "no issuer": Redis's tokens never go back and carry none, and the rows
-- claimed before this migration adopt the first issuer that claims them.

-- +goose Up
CREATE TABLE lock_issuers (
    id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    issuer     VARCHAR(128)    CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    first_seen DATETIME(6)     NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uq_lock_issuers_issuer (issuer)
) ENGINE = InnoDB;
ALTER TABLE products ADD COLUMN fence_issuer BIGINT UNSIGNED NOT NULL DEFAULT 0 AFTER fence_token;

-- +goose Down
ALTER TABLE products DROP COLUMN fence_issuer;
DROP TABLE lock_issuers;
