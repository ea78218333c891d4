package migrations_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/migrations"
	"lectern/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// emptyDatabase is a database with no migration applied, dropped at the end.
func emptyDatabase(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, _ := pgtest.Unmigrated(t)
	return pool
}

// A password hash that a version 1 user.signed_up event stored leaves the
// PostgreSQL event log (it is kept in credentials); the rest of the event,
// and other events, stay as they were.
func TestPasswordHashesLeaveTheStoredEvents(t *testing.T) {
	ctx := context.Background()
	pool := emptyDatabase(t)
	if err := migrations.UpTo(ctx, pool, 15); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO users (id, email, name, password_hash, roles, created_at, updated_at, version)
		VALUES (7, 'ann@example.com', 'Ann', '$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA', '{user}', now(), now(), 1);
		INSERT INTO events (uuid, payload, metadata, stream_id, version, event_type, schema_version, recorded_at) VALUES
		  (gen_random_uuid(), '{"user_id":7,"email":"ann@example.com","name":"Ann","password_hash":"$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA","roles":["user"]}', '{}', 'user-7', 1, 'user.signed_up', 1, now()),
		  (gen_random_uuid(), '{"agent_id":1,"owner_id":7,"name":"password_hash"}', '{}', 'agent-1', 1, 'agent.created', 1, now())`); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Up(ctx, pool); err != nil {
		t.Fatal(err)
	}
	var signedUp, agent, hash string
	if err := pool.QueryRow(ctx, `SELECT payload::text FROM events WHERE stream_id = 'user-7'`).Scan(&signedUp); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(signedUp, "argon2id") || !strings.Contains(signedUp, `"email": "ann@example.com"`) {
		t.Errorf("user.signed_up after the migrations: %s; want it without the hash, and otherwise whole", signedUp)
	}
	if err := pool.QueryRow(ctx, `SELECT payload::text FROM events WHERE stream_id = 'agent-1'`).Scan(&agent); err != nil || agent != `{"agent_id":1,"owner_id":7,"name":"password_hash"}` {
		t.Errorf("another event: %s (%v), want it untouched", agent, err)
	}
	if err := pool.QueryRow(ctx, `SELECT password_hash FROM credentials WHERE user_id = 7`).Scan(&hash); err != nil || !strings.HasPrefix(hash, "$argon2id$") {
		t.Errorf("credentials: %q (%v), want the hash kept there", hash, err)
	}
}

// Messages an older version published into the default topic with a
// partner's contact details or an invite code in clear are redacted as they
// would be published now; other messages, and those already redacted, stay
// as they were.
func TestPublishedMessagesAreRedacted(t *testing.T) {
	ctx := context.Background()
	pool := emptyDatabase(t)
	if err := migrations.UpTo(ctx, pool, 26); err != nil {
		t.Fatal(err)
	}
	msgs := map[string]string{
		"partner":  `{"type":"lectern.partner.created","data":{"partner_id":2,"org_id":1,"full_name":"Tina Teacher","email":"tina@example.com","phone":"+44 1234 567890","role":"partner"}}`,
		"issued":   `{"type":"lectern.class.invite_code_issued","data":{"class_id":1,"invite_code_id":3,"code":"PJYZKH4W"}}`,
		"used":     `{"type":"lectern.class.invite_code_used","data":{"class_id":1,"invite_code_id":3,"code":"PJYZKH4W","user_id":5}}`,
		"revoked":  `{"type":"lectern.class.invite_code_revoked","data":{"class_id":1,"invite_code_id":3,"code":"PJYZKH4W"}}`,
		"class":    `{"type":"lectern.class.created","data":{"class_id":1,"name":"Algebra A"}}`,
		"redacted": `{"type":"lectern.partner.created","data":{"partner_id":3,"full_name":"[redacted]","email":"[redacted]","phone":null}}`,
	}
	for id, payload := range msgs {
		if _, err := pool.Exec(ctx, `INSERT INTO watermill_lectern_classroom (uuid, payload, metadata, transaction_id)
			VALUES ($1, $2, '{}', pg_current_xact_id())`, id, payload); err != nil {
			t.Fatal(err)
		}
	}
	if err := migrations.Up(ctx, pool); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	rows, err := pool.Query(ctx, `SELECT uuid, payload::text FROM watermill_lectern_classroom`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, payload string
		if err := rows.Scan(&id, &payload); err != nil {
			t.Fatal(err)
		}
		got[id] = payload
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"Tina", "tina@", "+44", "PJYZKH4W"} {
		for id, payload := range got {
			if strings.Contains(payload, secret) {
				t.Errorf("message %s still holds %q: %s", id, secret, payload)
			}
		}
	}
	for _, id := range []string{"partner", "issued", "used", "revoked"} {
		if !strings.Contains(got[id], `"[redacted]"`) {
			t.Errorf("message %s: %s, want its fields redacted", id, got[id])
		}
	}
	if !strings.Contains(got["partner"], `"partner_id": 2`) || !strings.Contains(got["used"], `"user_id": 5`) {
		t.Errorf("the redacted messages lost other members: %s, %s", got["partner"], got["used"])
	}
	for _, id := range []string{"class", "redacted"} {
		if got[id] != msgs[id] {
			t.Errorf("message %s: %s, want it untouched: %s", id, got[id], msgs[id])
		}
	}
}

// Dead letters recorded before 00031 lose what their errors quote, and
// those of sealed events on the PostgreSQL store learn their subject, so
// that its erasure blanks them.
func TestOlderDeadLettersLoseTheirQuotedValues(t *testing.T) {
	ctx := context.Background()
	pool := emptyDatabase(t)
	if err := migrations.UpTo(ctx, pool, 30); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO events (uuid, payload, metadata, stream_id, version, event_type, schema_version, recorded_at) VALUES
		  ('00000000-0000-0000-0000-000000000001', '{"pii":{"sub":"user-7","ct":"AAAA"},"agent_id":1,"owner_id":7}', '{}', 'agent-1', 1, 'agent.created', 1, now()),
		  ('00000000-0000-0000-0000-000000000002', '{"class_id":2,"name":"Algebra"}', '{}', 'class-2', 1, 'class.created', 1, now());
		INSERT INTO projection_dead_letters (projection, event_id, event_type, stream_id, position, error, failures, status) VALUES
		  ('agents', '00000000-0000-0000-0000-000000000001', 'agent.created', 'agent-1', '1-1',
		   'event 1: ERROR: invalid input syntax for type integer: "Ann MRK" (SQLSTATE 22P02)', 5, 'resolved'),
		  ('classes', '00000000-0000-0000-0000-000000000002', 'class.created', 'class-2', '1-2', 'cannot apply', 5, 'skipped')`); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Up(ctx, pool); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `SELECT projection, error, coalesce(subject, '') FROM projection_dead_letters ORDER BY projection`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Projection, Error, Subject string }])
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ Projection, Error, Subject string }{
		{"agents", "event 1: ERROR: invalid input syntax for type integer: …", "user-7"},
		{"classes", "cannot apply", ""},
	}
	if !slices.Equal(got, want) {
		t.Errorf("dead letters after the migration: %+v, want %+v", got, want)
	}
}
