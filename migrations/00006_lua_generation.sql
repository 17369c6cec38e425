-- The generation of a redis-lua sale's state in Redis. Every load or rebuild of the state starts a
-- new generation, recorded here in the same transaction that reads what the state is rebuilt from;
-- the purchase script stamps each stream entry with the generation of the state that accepted it,
-- and a persister writes an entry only while its generation is still the product's. An entry read
-- by a persister before Redis lost the state and committed after the rebuild read MySQL would
-- otherwise take a unit the rebuilt state still sells.

-- +goose Up
ALTER TABLE products ADD COLUMN lua_gen BIGINT UNSIGNED NOT NULL DEFAULT 0 AFTER sale_epoch;

-- +goose Down
ALTER TABLE products DROP COLUMN lua_gen;
