// Package queries reads the read models; no query ever reads the event store.
package queries

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/derrors"
)

// Page is a 1-based page request.
type Page struct {
	Page int
	Size int
}

// Offset is the number of rows before the page.
func (p Page) Offset() int { return (p.Page - 1) * p.Size }

// List is one page of results with the total count.
type List[T any] struct {
	Items []T
	Total int
	Page  Page
}

// DB is the read side's connection pool.
type DB struct{ pool *pgxpool.Pool }

// New returns the queries over pool.
func New(pool *pgxpool.Pool) *DB { return &DB{pool: pool} }

func notFound(err error, what string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return derrors.New(derrors.ErrNotFound, "%s not found", what)
	}
	return err
}

// User is the users read model row.
type User struct {
	ID        int64
	Email     string
	Name      string
	Roles     []string
	CreatedAt time.Time
	UpdatedAt time.Time
}

const userColumns = `id, email, name, roles, created_at, updated_at`

func scanUser(row pgx.Row) (User, error) {
	var u User
	err := row.Scan(&u.ID, &u.Email, &u.Name, &u.Roles, &u.CreatedAt, &u.UpdatedAt)
	return u, err
}

// UserByID reads one user.
func (q *DB) UserByID(ctx context.Context, id int64) (User, error) {
	u, err := scanUser(q.pool.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1`, id))
	return u, notFound(err, "User")
}

// UserByEmail reads one user by normalised e-mail.
func (q *DB) UserByEmail(ctx context.Context, email string) (User, error) {
	u, err := scanUser(q.pool.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE email = $1`, email))
	return u, notFound(err, "User")
}

// Agent is the agents read model row.
type Agent struct {
	ID              int64
	OwnerID         int64
	Name            string
	SystemPrompt    string
	RoleDescription *string
	TemplateSource  *string
	IsActive        bool
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

const agentColumns = `id, owner_id, name, system_prompt, role_description, template_source, is_active, created_at, updated_at`

func scanAgent(row pgx.Row) (Agent, error) {
	var a Agent
	err := row.Scan(&a.ID, &a.OwnerID, &a.Name, &a.SystemPrompt, &a.RoleDescription, &a.TemplateSource, &a.IsActive, &a.CreatedAt, &a.UpdatedAt)
	return a, err
}

// Agent reads one of owner's agents; another user's agent is not found.
func (q *DB) Agent(ctx context.Context, owner, id int64) (Agent, error) {
	a, err := scanAgent(q.pool.QueryRow(ctx, `SELECT `+agentColumns+` FROM agents WHERE id = $1 AND owner_id = $2`, id, owner))
	return a, notFound(err, "Agent")
}

// Agents lists owner's agents, oldest first.
func (q *DB) Agents(ctx context.Context, owner int64, p Page) (List[Agent], error) {
	return readPage(ctx, q, p, scanAgent, `SELECT count(*) FROM agents WHERE owner_id = $1`,
		`SELECT `+agentColumns+` FROM agents WHERE owner_id = $1 ORDER BY id LIMIT $2 OFFSET $3`, owner, p.Size, p.Offset())
}

// readPage reads one page of a list and the list's total in one statement,
// and so from one snapshot: a projection that commits while the list is
// read shows in both or in neither. (Read as two statements, a count and
// then the page, each saw its own snapshot under READ COMMITTED: a total of
// 3 with 4 items, or a page claiming more items than it showed.)
//
// countSQL counts the list's rows; pageSQL selects the page, in its order, by
// id, with its LIMIT and OFFSET, and its columns are those scan reads; the
// two share args. Each is planned as it was as a statement of its own, and
// the count is read once: count(*) OVER () would read every row of the list
// in full before the page's (6 times slower at 10 000 rows). The page is
// joined to the count with LEFT JOIN, so that an empty page (an empty list,
// or a page past the end) still brings back a row: the total, every page
// column NULL. The outer ORDER BY keeps the page's order, which a join does
// not promise.
func readPage[T any](ctx context.Context, q *DB, p Page, scan func(pgx.Row) (T, error), countSQL, pageSQL string, args ...any) (List[T], error) {
	out := List[T]{Items: []T{}, Page: p}
	rows, err := q.pool.Query(ctx, `SELECT c.total, p.* FROM (`+countSQL+`) AS c (total) LEFT JOIN (`+pageSQL+`) AS p ON true
		ORDER BY p.id`, args...)
	if err != nil {
		return out, err
	}
	return out, readRows(rows, &out, scan)
}

// readRows reads into out the rows of a page, each the list's total and
// then an item's columns, as scan reads them, or the one row of an empty
// page (emptyPage), and closes rows.
func readRows[T any](rows pgx.Rows, out *List[T], scan func(pgx.Row) (T, error)) error {
	defer rows.Close()
	for rows.Next() {
		if emptyPage(rows) {
			if err := scanTotal(rows, &out.Total); err != nil {
				return err
			}
			continue
		}
		item, err := scan(totalAndItem{rows: rows, total: &out.Total})
		if err != nil {
			return err
		}
		out.Items = append(out.Items, item)
	}
	return rows.Err()
}

// emptyPage reports whether rows' current row is the one of an empty page:
// the total (the first column) and NULL page columns, of which the first, an
// id, is never NULL in an item.
func emptyPage(rows pgx.Rows) bool { return rows.RawValues()[1] == nil }

// scanTotal reads the total of the empty page's row.
func scanTotal(rows pgx.Rows, total *int) error {
	dest := make([]any, len(rows.FieldDescriptions())) // nil skips a column
	dest[0] = total
	return rows.Scan(dest...)
}

// totalAndItem is a row of a page, a total then an item's columns, as a
// pgx.Row of the item alone: Scan reads the total into total.
type totalAndItem struct {
	rows  pgx.Rows
	total *int
}

func (r totalAndItem) Scan(dest ...any) error {
	return r.rows.Scan(append([]any{r.total}, dest...)...)
}
