-- +goose Up
-- A request in progress holds its key for a short lease that it renews while
-- it runs; a key whose request died with its process lapses within seconds.
ALTER TABLE idempotency_keys ADD COLUMN lease_until TIMESTAMPTZ NOT NULL DEFAULT now();

-- +goose Down
ALTER TABLE idempotency_keys DROP COLUMN lease_until;
