package projections

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"lectern/events"
	"lectern/personal"
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
	return withLoader(Projection{Name: FewShotExamplesProjection, Tables: []string{"few_shot_examples"}, Handlers: []GroupHandler{
		OnSet(func(ctx context.Context, tx pgx.Tx, ms []events.Meta, es []events.FewShotCreated) error {
			n := len(es)
			versions, at := metaColumns(ms)
			ids, users := make([]int64, n), make([]int64, n)
			titles, metas := make([]*string, n), make([]*string, n)
			inputs, outputs, active := make([]string, n), make([]string, n), make([]bool, n)
			for i, e := range es {
				ids[i], users[i] = e.ExampleID, e.UserID
				titles[i], inputs[i], outputs[i], active[i] = e.Title, e.InputText, e.OutputText, e.IsActive
				if e.Meta != nil {
					meta := string(e.Meta)
					metas[i] = &meta
				}
			}
			_, err := tx.Exec(ctx, `
				INSERT INTO few_shot_examples (id, user_id, title, input_text, output_text, meta, is_active, created_at, updated_at, version)
				SELECT id, user_id, title, input_text, output_text, COALESCE(meta::json, '{}'::json), is_active, at, at, version
				FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bool[], $8::timestamptz[], $9::bigint[])
					AS e(id, user_id, title, input_text, output_text, meta, is_active, at, version)
				ON CONFLICT (id) DO NOTHING`,
				ids, users, titles, inputs, outputs, metas, active, at, versions)
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
		// The user's examples read as fewshot.created and fewshot.updated at
		// their placeholders; their streams did not move (see crossStream).
		OnSet(func(ctx context.Context, tx pgx.Tx, _ []events.Meta, es []events.UserErased) error {
			_, err := tx.Exec(ctx, `
				UPDATE few_shot_examples SET title = NULL, input_text = $2, output_text = $2, meta = '{}'::json
				WHERE user_id = ANY($1::bigint[])`,
				erasedIDs(es), personal.ErasedText)
			return err
		}),
	}}, newFewShotsLoader)
}

// fewShotRow is a few_shot_examples row as its loader keeps it.
type fewShotRow struct {
	id, user            int64
	title               *string
	input, output, meta string
	active              bool
}

// newFewShotsLoader folds what FewShotExamples' handlers apply, for a replay
// (see Loader).
func newFewShotsLoader() Loader {
	l := newRowLoader("few_shot_examples", []string{"id", "user_id", "title", "input_text", "output_text", "meta", "is_active"},
		func(f fewShotRow) []any { return []any{f.id, f.user, f.title, f.input, f.output, f.meta, f.active} })
	meta := func(m json.RawMessage) string { // the handlers' COALESCE(meta::json, '{}'::json)
		if m == nil {
			return "{}"
		}
		return string(m)
	}
	foldInto(l, func(m events.Meta, e *events.FewShotCreated) {
		l.create(m, e.ExampleID, fewShotRow{id: e.ExampleID, user: e.UserID, title: e.Title, input: e.InputText,
			output: e.OutputText, meta: meta(e.Meta), active: e.IsActive})
	})
	foldInto(l, func(m events.Meta, e *events.FewShotUpdated) {
		if f := l.change(m, e.ExampleID); f != nil {
			f.title, f.input, f.output, f.meta, f.active = e.Title, e.InputText, e.OutputText, meta(e.Meta), e.IsActive
		}
	})
	l.byOwner(func(f fewShotRow) int64 { return f.user })
	foldInto(l, func(_ events.Meta, e *events.UserErased) {
		l.ofUser(e.UserID, func(f *fewShotRow) {
			f.title, f.input, f.output, f.meta = nil, personal.ErasedText, personal.ErasedText, "{}"
		})
	})
	return l
}
