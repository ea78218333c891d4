-- +goose Up
-- The topic downstream systems subscribe to (downstream.DefaultTopic,
-- docs/subscribing.md): CloudEvents published by the "downstream" forwarder
-- in the same transaction as its checkpoint. The tables are watermill-sql
-- v4's default PostgreSQL schema and offsets adapter, verbatim, so a stock
-- watermill-sql subscriber reads them; its consumer groups keep their
-- offsets in the second table.
CREATE TABLE IF NOT EXISTS "watermill_lectern_classroom" (
    "offset" BIGSERIAL,
    "uuid" VARCHAR(36) NOT NULL,
    "created_at" TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "payload" JSON DEFAULT NULL,
    "metadata" JSON DEFAULT NULL,
    "transaction_id" xid8 NOT NULL,
    PRIMARY KEY ("transaction_id", "offset")
);

CREATE TABLE IF NOT EXISTS "watermill_offsets_lectern_classroom" (
    consumer_group VARCHAR(255) NOT NULL,
    offset_acked BIGINT,
    last_processed_transaction_id xid8 NOT NULL,
    PRIMARY KEY (consumer_group)
);

-- +goose Down
DROP TABLE "watermill_offsets_lectern_classroom";
DROP TABLE "watermill_lectern_classroom";
