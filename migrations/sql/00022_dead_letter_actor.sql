-- +goose Up
-- Who asked for a dead letter's retry or skip (`lectern projections
-- dead-letters retry|skip`): "cli:<command> by <account>", as the actor of
-- events appended from the command line. NULL until an operator answers.
ALTER TABLE projection_dead_letters ADD COLUMN resolved_by TEXT;

-- +goose Down
ALTER TABLE projection_dead_letters DROP COLUMN resolved_by;
