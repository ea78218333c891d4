package projections

import (
	"context"

	"github.com/jackc/pgx/v5"

	"lectern/events"
)

// Projection names: persisted consumer groups.
const (
	UsersProjection  = AccountsProjection
	AgentsProjection = AccountsProjection
)

// Users projects accounts into the users table.
func Users() Projection {
	return Projection{Name: UsersProjection, Tables: []string{"users"}, Handlers: []GroupHandler{
		On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.UserSignedUp) error {
			_, err := tx.Exec(ctx, `
				INSERT INTO users (id, email, name, password_hash, roles, created_at, updated_at, version)
				VALUES ($1, $2, $3, $4, $5, $6, $6, $7)
				ON CONFLICT (id) DO NOTHING`,
				e.UserID, e.Email, e.Name, e.PasswordHash, e.Roles, m.RecordedAt, m.Version)
			return err
		}),
		On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.UserRoleGranted) error {
			_, err := tx.Exec(ctx, `
				UPDATE users SET roles = CASE WHEN $2 = ANY(roles) THEN roles ELSE array_append(roles, $2) END,
					updated_at = $3, version = $4
				WHERE id = $1 AND version < $4`,
				e.UserID, e.Role, m.RecordedAt, m.Version)
			return err
		}),
	}}
}

// Agents projects agents into the agents table.
func Agents() Projection {
	return Projection{Name: AgentsProjection, Tables: []string{"agents"}, Handlers: []GroupHandler{
		On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.AgentCreated) error {
			_, err := tx.Exec(ctx, `
				INSERT INTO agents (id, owner_id, name, system_prompt, role_description, template_source, is_active, created_at, updated_at, version)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9)
				ON CONFLICT (id) DO NOTHING`,
				e.AgentID, e.OwnerID, e.Name, e.SystemPrompt, e.RoleDescription, e.TemplateSource, e.IsActive, m.RecordedAt, m.Version)
			return err
		}),
		On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.AgentUpdated) error {
			_, err := tx.Exec(ctx, `
				UPDATE agents SET name = $2, system_prompt = $3, role_description = $4, template_source = $5,
					is_active = $6, updated_at = $7, version = $8
				WHERE id = $1 AND version < $8`,
				e.AgentID, e.Name, e.SystemPrompt, e.RoleDescription, e.TemplateSource, e.IsActive, m.RecordedAt, m.Version)
			return err
		}),
	}}
}
