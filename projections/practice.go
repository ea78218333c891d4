package projections

import (
	"context"

	"github.com/jackc/pgx/v5"

	"lectern/events"
)

// Projection names of this area: persisted consumer groups.
const (
	FewShotExamplesProjection = PracticeProjection
)

// PracticeProjections project few-shot examples and practice sessions.
func PracticeProjections() []Projection {
	return []Projection{FewShotExamples()}
}

// FewShotExamples projects few-shot examples into the few_shot_examples table.
func FewShotExamples() Projection {
	return Projection{Name: FewShotExamplesProjection, Tables: []string{"few_shot_examples"}, Handlers: []GroupHandler{
		On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.FewShotCreated) error {
			_, err := tx.Exec(ctx, `
				INSERT INTO few_shot_examples (id, user_id, title, input_text, output_text, meta, is_active, created_at, updated_at, version)
				VALUES ($1, $2, $3, $4, $5, COALESCE($6::json, '{}'::json), $7, $8, $8, $9)
				ON CONFLICT (id) DO NOTHING`,
				e.ExampleID, e.UserID, e.Title, e.InputText, e.OutputText, e.Meta, e.IsActive, m.RecordedAt, m.Version)
			return err
		}),
		On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.FewShotUpdated) error {
			_, err := tx.Exec(ctx, `
				UPDATE few_shot_examples SET title = $2, input_text = $3, output_text = $4, meta = COALESCE($5::json, '{}'::json),
					is_active = $6, updated_at = $7, version = $8
				WHERE id = $1 AND version < $8`,
				e.ExampleID, e.Title, e.InputText, e.OutputText, e.Meta, e.IsActive, m.RecordedAt, m.Version)
			return err
		}),
	}}
}
