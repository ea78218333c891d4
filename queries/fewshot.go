package queries

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"
)

// FewShotExample is the few_shot_examples read model row.
type FewShotExample struct {
	ID         int64
	UserID     int64
	Title      *string
	InputText  string
	OutputText string
	Meta       json.RawMessage // a JSON object
	IsActive   bool
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

const fewShotColumns = `id, user_id, title, input_text, output_text, meta, is_active, created_at, updated_at`

func scanFewShot(row pgx.Row) (FewShotExample, error) {
	var x FewShotExample
	err := row.Scan(&x.ID, &x.UserID, &x.Title, &x.InputText, &x.OutputText, &x.Meta, &x.IsActive, &x.CreatedAt, &x.UpdatedAt)
	return x, err
}

func collectFewShot(row pgx.CollectableRow) (FewShotExample, error) { return scanFewShot(row) }

// FewShotExample reads one of owner's examples; another user's example is
// not found.
func (q *DB) FewShotExample(ctx context.Context, owner, id int64) (FewShotExample, error) {
	x, err := scanFewShot(q.pool.QueryRow(ctx, `SELECT `+fewShotColumns+` FROM few_shot_examples WHERE id = $1 AND user_id = $2`, id, owner))
	return x, notFound(err, "Few-shot example")
}

// ListFewShotExamples lists owner's examples, oldest first; a non-nil active
// keeps only the examples whose is_active equals it.
func (q *DB) ListFewShotExamples(ctx context.Context, owner int64, active *bool, p Page) (List[FewShotExample], error) {
	const where = ` FROM few_shot_examples WHERE user_id = $1 AND ($2::boolean IS NULL OR is_active = $2)`
	return readPage(ctx, q, p, scanFewShot, `SELECT count(*)`+where,
		`SELECT `+fewShotColumns+where+` ORDER BY id LIMIT $3 OFFSET $4`, owner, active, p.Size, p.Offset())
}

// FewShotExamples returns owner's examples with the given ids, in the order
// of ids, whether active or not. An id that names no example of owner's
// (another user's, or none at all) is simply left out, so a caller that needs
// every id to be valid compares the lengths; an id given twice is returned
// twice. For the practice-session settings' few_shot_example_ids.
func (q *DB) FewShotExamples(ctx context.Context, owner int64, ids []int64) ([]FewShotExample, error) {
	if len(ids) == 0 {
		return []FewShotExample{}, nil
	}
	rows, err := q.pool.Query(ctx, `
		SELECT f.id, f.user_id, f.title, f.input_text, f.output_text, f.meta, f.is_active, f.created_at, f.updated_at
		FROM unnest($2::bigint[]) WITH ORDINALITY AS wanted(id, ord)
		JOIN few_shot_examples f ON f.id = wanted.id AND f.user_id = $1
		ORDER BY wanted.ord`, owner, ids)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, collectFewShot)
	if out == nil {
		out = []FewShotExample{}
	}
	return out, err
}
