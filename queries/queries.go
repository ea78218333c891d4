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
	out := List[Agent]{Items: []Agent{}, Page: p}
	if err := q.pool.QueryRow(ctx, `SELECT count(*) FROM agents WHERE owner_id = $1`, owner).Scan(&out.Total); err != nil {
		return out, err
	}
	rows, err := q.pool.Query(ctx, `SELECT `+agentColumns+` FROM agents WHERE owner_id = $1 ORDER BY id LIMIT $2 OFFSET $3`, owner, p.Size, p.Offset())
	if err != nil {
		return out, err
	}
	defer rows.Close()
	for rows.Next() {
		a, err := scanAgent(rows)
		if err != nil {
			return out, err
		}
		out.Items = append(out.Items, a)
	}
	return out, rows.Err()
}
