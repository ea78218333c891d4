-- +goose Up
-- When the event store is EventStoreDB, each projection (consumer group)
-- keeps its $all subscription checkpoint here, updated in the same
-- transaction as the projection's rows (projections.ESDBSubscriber).
-- Positions are EventStoreDB's commit and prepare positions.
CREATE TABLE esdb_checkpoints (
    consumer_group   VARCHAR(255) PRIMARY KEY,
    commit_position  BIGINT NOT NULL CHECK (commit_position >= 0),
    prepare_position BIGINT NOT NULL CHECK (prepare_position >= 0)
);

-- +goose Down
DROP TABLE esdb_checkpoints;
