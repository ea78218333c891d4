package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"lectern/migrations"
	"lectern/pgtest"
	"lectern/projections"
)

// runCLI runs lectern with args against the database at url.
func runCLI(t *testing.T, url string, args ...string) {
	t.Helper()
	if _, err := cli(t, url, nil, args...); err != nil {
		t.Fatalf("lectern %s: %v", strings.Join(args, " "), err)
	}
}

// cli runs lectern with args against the database at url, in an
// environment of its own (a data key, no JWT key, no broker) with env's
// variables over it, and returns what it printed.
func cli(t *testing.T, url string, env map[string]string, args ...string) (string, error) {
	t.Helper()
	cliEnv(t, url, env)
	var out strings.Builder
	cmd := root()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// cliDataKey is the master key of personal data (hex) that cliEnv gives
// lectern: tests that open what the CLI sealed use it too.
var cliDataKey = strings.Repeat("ab", 32)

// cliEnv sets the environment cli runs lectern in.
func cliEnv(t *testing.T, url string, env map[string]string) {
	t.Helper()
	t.Setenv("DATABASE_URL", url)
	t.Setenv("EVENTSTORE_URL", "")
	t.Setenv("LECTERN_DATA_KEY", cliDataKey)
	t.Setenv("LECTERN_DATA_KEY_FILE", "")
	t.Setenv("LECTERN_DATA_KEY_PREVIOUS", "")
	t.Setenv("LECTERN_DATA_KEY_PREVIOUS_FILE", "")
	t.Setenv("LECTERN_JWT_KEY", "")
	t.Setenv("LECTERN_JWT_KEY_FILE", "")
	t.Setenv("LECTERN_BROKER_URL", "")
	t.Setenv("LECTERN_ADMIN_EMAILS", "")
	t.Setenv("LECTERN_LOG_LEVEL", "error")
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// Every event a CLI command appends names the command as its actor:
// `users create`, and `users create --admin` on an existing account.
func TestCLIEventsNameTheirActor(t *testing.T) {
	pool, url := pgtest.FreshURL(t)
	ctx := context.Background()
	runCLI(t, url, "users", "create", "--email", "ops@example.com", "--name", "Ops", "--password", "long enough")
	runCLI(t, url, "users", "create", "--email", "ops@example.com", "--name", "Ops", "--password", "long enough", "--admin")

	rows, err := pool.Query(ctx, `SELECT event_type, coalesce(metadata::jsonb->>'actor', '') FROM events ORDER BY transaction_id, "offset"`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var types []string
	for rows.Next() {
		var typ, actor string
		if err := rows.Scan(&typ, &actor); err != nil {
			t.Fatal(err)
		}
		types = append(types, typ)
		if !strings.HasPrefix(actor, "cli:users create by ") {
			t.Errorf("%s: actor %q, want cli:users create by <account>", typ, actor)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(types, ",") != "user.signed_up,user.role_granted" {
		t.Errorf("events %v, want user.signed_up then user.role_granted", types)
	}
}

// An operator's retry or skip of a dead letter records who asked.
func TestCLIDeadLetterNamesItsActor(t *testing.T) {
	pool, url := pgtest.FreshURL(t)
	ctx := context.Background()
	if err := migrations.Up(ctx, pool); err != nil {
		t.Fatal(err)
	}
	id := uuid.New()
	if _, err := pool.Exec(ctx, `INSERT INTO projection_dead_letters (projection, event_id, event_type, stream_id, position, error, failures, status)
		VALUES ('agents', $1, 'agent.created', 'agent-1', '1', 'boom', 3, 'stopped')`, id); err != nil {
		t.Fatal(err)
	}
	runCLI(t, url, "projections", "dead-letters", "skip", "agents", id.String())
	letters, err := projections.ListDeadLetters(ctx, pool, true)
	if err != nil || len(letters) != 1 {
		t.Fatalf("dead letters %+v, %v", letters, err)
	}
	if d := letters[0]; d.Status != projections.DeadLetterSkip || !strings.HasPrefix(d.ResolvedBy, "cli:projections dead-letters skip by ") {
		t.Errorf("dead letter %+v: want status skip, resolved by the CLI command", d)
	}
	if time.Since(letters[0].UpdatedAt) > time.Hour {
		t.Errorf("updated_at %v not refreshed", letters[0].UpdatedAt)
	}
}
