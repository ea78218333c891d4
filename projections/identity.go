package projections

import (
	"context"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"lectern/events"
	"lectern/personal"
)

// Projection names: persisted consumer groups.
const (
	UsersProjection  = AccountsProjection
	AgentsProjection = AccountsProjection
)

// Users projects accounts into the users table.
func Users() Projection {
	p := withLoader(Projection{Name: UsersProjection, Tables: []string{"users"}, Handlers: []GroupHandler{
		OnSet(func(ctx context.Context, tx pgx.Tx, ms []events.Meta, es []events.UserSignedUp) error {
			n := len(es)
			versions, at := metaColumns(ms)
			ids, emails, names, roles := make([]int64, n), make([]string, n), make([]string, n), make([]string, n)
			for i, e := range es {
				ids[i], emails[i], names[i], roles[i] = e.UserID, e.Email, e.Name, textArray(e.Roles)
			}
			_, err := tx.Exec(ctx, `
				INSERT INTO users (id, email, name, roles, created_at, updated_at, version)
				SELECT id, email, name, roles::text[], at, at, version
				FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::bigint[])
					AS e(id, email, name, roles, at, version)
				ON CONFLICT (id) DO NOTHING`,
				ids, emails, names, roles, at, versions)
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
		// The user's row reads as user.signed_up at its placeholders; the
		// event is the user's stream's, so the row moves to it.
		OnSet(func(ctx context.Context, tx pgx.Tx, ms []events.Meta, es []events.UserErased) error {
			versions, at := metaColumns(ms)
			ids := erasedIDs(es)
			_, err := tx.Exec(ctx, `
				UPDATE users u SET email = e.email, name = $3, updated_at = e.at, version = e.version
				FROM unnest($1::bigint[], $2::text[], $4::timestamptz[], $5::bigint[]) AS e(id, email, at, version)
				WHERE u.id = e.id AND u.version < e.version`,
				ids, erasedEmails(ids), personal.ErasedText, at, versions)
			return err
		}),
	}}, newUsersLoader)
	// The table a replay swaps in gets the triggers that make changes of
	// roles wait for session leases (migration 00024); since its roles may
	// read otherwise, the swap waits as such a change does.
	p.Swapped = []string{`SELECT lectern_users_barriers()`, `SELECT lectern_auth_barrier()`}
	return p
}

// userRow is a users row as its loader keeps it.
type userRow struct {
	id          int64
	email, name string
	roles       []string
}

// newUsersLoader folds what Users' handlers apply, for a replay (see Loader).
func newUsersLoader() Loader {
	l := newRowLoader("users", []string{"id", "email", "name", "roles"},
		func(u userRow) []any { return []any{u.id, u.email, u.name, u.roles} })
	foldInto(l, func(m events.Meta, e *events.UserSignedUp) {
		roles := e.Roles
		if roles == nil {
			roles = []string{} // NULL otherwise; the handler binds '{}'
		}
		l.create(m, e.UserID, userRow{id: e.UserID, email: e.Email, name: e.Name, roles: roles})
	})
	foldInto(l, func(m events.Meta, e *events.UserRoleGranted) {
		if u := l.change(m, e.UserID); u != nil && !slices.Contains(u.roles, e.Role) {
			u.roles = append(slices.Clip(u.roles), e.Role)
		}
	})
	foldInto(l, func(m events.Meta, e *events.UserErased) {
		if u := l.change(m, e.UserID); u != nil {
			u.email, u.name = erasedEmail(e.UserID), personal.ErasedText
		}
	})
	return l
}

// Agents projects agents into the agents table.
func Agents() Projection {
	return withLoader(Projection{Name: AgentsProjection, Tables: []string{"agents"}, Handlers: []GroupHandler{
		OnSet(func(ctx context.Context, tx pgx.Tx, ms []events.Meta, es []events.AgentCreated) error {
			versions, at := metaColumns(ms)
			ids, owners := make([]int64, len(es)), make([]int64, len(es))
			var f agentFields
			for i, e := range es {
				ids[i], owners[i] = e.AgentID, e.OwnerID
				f.add(e.Name, e.SystemPrompt, e.RoleDescription, e.TemplateSource, e.IsActive)
			}
			_, err := tx.Exec(ctx, `
				INSERT INTO agents (id, owner_id, name, system_prompt, role_description, template_source, is_active, created_at, updated_at, version)
				SELECT id, owner_id, name, system_prompt, role_description, template_source, is_active, at, at, version
				FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bool[], $8::timestamptz[], $9::bigint[])
					AS e(id, owner_id, name, system_prompt, role_description, template_source, is_active, at, version)
				ON CONFLICT (id) DO NOTHING`,
				ids, owners, f.names, f.prompts, f.roles, f.templates, f.active, at, versions)
			return err
		}),
		OnSet(func(ctx context.Context, tx pgx.Tx, ms []events.Meta, es []events.AgentUpdated) error {
			versions, at := metaColumns(ms)
			ids := make([]int64, len(es))
			var f agentFields
			for i, e := range es {
				ids[i] = e.AgentID
				f.add(e.Name, e.SystemPrompt, e.RoleDescription, e.TemplateSource, e.IsActive)
			}
			_, err := tx.Exec(ctx, `
				UPDATE agents a SET name = e.name, system_prompt = e.system_prompt, role_description = e.role_description,
					template_source = e.template_source, is_active = e.is_active, updated_at = e.at, version = e.version
				FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bool[], $7::timestamptz[], $8::bigint[])
					AS e(id, name, system_prompt, role_description, template_source, is_active, at, version)
				WHERE a.id = e.id AND a.version < e.version`,
				ids, f.names, f.prompts, f.roles, f.templates, f.active, at, versions)
			return err
		}),
		// The user's agents read as agent.created and agent.updated at their
		// placeholders (the owner is their subject); their streams did not
		// move (see crossStream).
		OnSet(func(ctx context.Context, tx pgx.Tx, _ []events.Meta, es []events.UserErased) error {
			_, err := tx.Exec(ctx, `
				UPDATE agents SET name = $2, system_prompt = $2, role_description = NULL, template_source = NULL
				WHERE owner_id = ANY($1::bigint[])`,
				erasedIDs(es), personal.ErasedText)
			return err
		}),
	}}, newAgentsLoader)
}

// agentRow is an agents row as its loader keeps it.
type agentRow struct {
	id, owner      int64
	name, prompt   string
	role, template *string
	active         bool
}

// newAgentsLoader folds what Agents' handlers apply, for a replay (see Loader).
func newAgentsLoader() Loader {
	l := newRowLoader("agents", []string{"id", "owner_id", "name", "system_prompt", "role_description", "template_source", "is_active"},
		func(a agentRow) []any { return []any{a.id, a.owner, a.name, a.prompt, a.role, a.template, a.active} })
	foldInto(l, func(m events.Meta, e *events.AgentCreated) {
		l.create(m, e.AgentID, agentRow{id: e.AgentID, owner: e.OwnerID, name: e.Name, prompt: e.SystemPrompt,
			role: e.RoleDescription, template: e.TemplateSource, active: e.IsActive})
	})
	foldInto(l, func(m events.Meta, e *events.AgentUpdated) {
		if a := l.change(m, e.AgentID); a != nil {
			a.name, a.prompt, a.role, a.template, a.active = e.Name, e.SystemPrompt, e.RoleDescription, e.TemplateSource, e.IsActive
		}
	})
	l.byOwner(func(a agentRow) int64 { return a.owner })
	foldInto(l, func(_ events.Meta, e *events.UserErased) {
		l.ofUser(e.UserID, func(a *agentRow) {
			a.name, a.prompt, a.role, a.template = personal.ErasedText, personal.ErasedText, nil, nil
		})
	})
	return l
}

// agentFields are agents' editable fields as the statements bind them, one
// element per event.
type agentFields struct {
	names, prompts   []string
	roles, templates []*string
	active           []bool
}

func (f *agentFields) add(name, prompt string, role, template *string, active bool) {
	f.names, f.prompts, f.active = append(f.names, name), append(f.prompts, prompt), append(f.active, active)
	f.roles, f.templates = append(f.roles, role), append(f.templates, template)
}

var arrayElementEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

// textArray is ss as a PostgreSQL array literal (a text cast to text[] in
// SQL: arrays of arrays must be rectangular).
func textArray(ss []string) string {
	quoted := make([]string, len(ss))
	for i, s := range ss {
		quoted[i] = `"` + arrayElementEscaper.Replace(s) + `"`
	}
	return "{" + strings.Join(quoted, ",") + "}"
}
