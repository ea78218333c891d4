package downstream_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/downstream"
	"lectern/eventstore/esdbfake"
	"lectern/mail"
	"lectern/pgtest"
	"lectern/service"
)

func TestMain(m *testing.M) {
	// A restarted forwarder waits this long first; short, so outages in
	// these tests end quickly.
	downstream.FirstBackoff, downstream.MaxBackoff = 50*time.Millisecond, 500*time.Millisecond
	os.Exit(m.Run())
}

// harness is a running service with its own database, driven over HTTP.
type harness struct {
	t    *testing.T
	pool *pgxpool.Pool
	svc  *service.Service
	url  string
	stop func()
	// strict: a write whose read models lag (X-Projection-Pending) fails.
	strict bool
}

func start(t *testing.T, pool *pgxpool.Pool, cfg service.Config) *harness {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	cfg.Pool, cfg.JWTKey, cfg.Mail = pool, key, mail.NewLogSender(quiet)
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	cfg.AdminEmails = []string{"admin@example.com"}
	if cfg.ConsistencyWait == 0 {
		cfg.ConsistencyWait = pgtest.ConsistencyWait
	}
	svc, err := service.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := svc.RunBackground(context.Background(), true)
	srv := httptest.NewServer(svc.Handler)
	h := &harness{t: t, pool: pool, svc: svc, url: srv.URL}
	h.stop = func() { srv.Close(); stop(); svc.Close() }
	t.Cleanup(func() { h.stop() })
	return h
}

func (h *harness) do(method, path, token, body string, want int) map[string]any {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	if res.StatusCode != want {
		h.t.Fatalf("%s %s: %d %v, want %d", method, path, res.StatusCode, out, want)
	}
	if h.strict && res.Header.Get("X-Projection-Pending") != "" {
		h.t.Fatalf("%s %s: the read models did not catch up with the write (X-Projection-Pending)", method, path)
	}
	return out
}

func (h *harness) user(email string) (id int64, token string) {
	h.t.Helper()
	u, _, err := h.svc.Identity.CreateUser(context.Background(), email, "correct horse", "Someone", email == "admin@example.com")
	if err != nil {
		h.t.Fatal(err)
	}
	out := h.do(http.MethodPost, "/user/login", "", `{"email":"`+email+`","password":"correct horse"}`, http.StatusOK)
	return u.ID, out["access_token"].(string)
}

func id(m map[string]any) int64 { return int64(m["id"].(float64)) }

// classroom creates an organisation, a partner, a course, a class (with its
// two invite codes), renames the class, enrolls a student and drops the
// enrollment: every kind of change a subscriber sees, and some it must not
// (users, the organisation). It returns the class, for rename.
func (h *harness) classroom() scenario {
	h.t.Helper()
	_, admin := h.user("admin@example.com")
	teacherID, teacher := h.user("teacher@example.com")
	studentID, student := h.user("student@example.com")
	org := id(h.do(http.MethodPost, "/admin/organizations", admin, `{"name":"Riverside School"}`, http.StatusCreated))
	partner := id(h.do(http.MethodPost, fmt.Sprintf("/partner/partners?org_id=%d", org), admin,
		fmt.Sprintf(`{"org_id":%d,"full_name":"Teacher","email":"teacher@example.com","user_id":%d}`, org, teacherID), http.StatusCreated))
	course := id(h.do(http.MethodPost, fmt.Sprintf("/partner/%d/course", partner), teacher, `{"title":"Algebra","course_key":"ALG-1"}`, http.StatusCreated))
	class := id(h.do(http.MethodPost, fmt.Sprintf("/partner/%d/classes?course_id=%d", partner, course), teacher,
		`{"name":"Algebra A","capacity":30}`, http.StatusCreated))
	h.do(http.MethodPatch, fmt.Sprintf("/partner/%d/classes/%d", partner, class), teacher, `{"name":"Algebra B"}`, http.StatusOK)
	enrollment := id(h.do(http.MethodPost, fmt.Sprintf("/partner/%d/student/%d/enrollments", partner, studentID), teacher,
		fmt.Sprintf(`{"class_id":%d,"student_id":%d}`, class, studentID), http.StatusCreated))
	h.do(http.MethodDelete, fmt.Sprintf("/user/class/enrollments/%d", enrollment), student, "", http.StatusNoContent)
	return scenario{partner: partner, class: class}
}

// scenario is the class classroom made, and its partner's.
type scenario struct{ partner, class int64 }

// rename renames the scenario's class, as its teacher: one more change a
// subscriber sees (class.updated), later in the log than any before it.
func (h *harness) rename(s scenario, name string) {
	h.t.Helper()
	login := h.do(http.MethodPost, "/user/login", "", `{"email":"teacher@example.com","password":"correct horse"}`, http.StatusOK)
	h.do(http.MethodPatch, fmt.Sprintf("/partner/%d/classes/%d", s.partner, s.class), login["access_token"].(string),
		fmt.Sprintf(`{"name":%q}`, name), http.StatusOK)
}

// stored is an event of the log as the store recorded it.
type stored struct {
	ID, Stream, Type string
	Version          int64
	RecordedAt       time.Time
	Payload          json.RawMessage
}

// published reads, in log order, the events a subscriber must receive.
func published(t *testing.T, pool *pgxpool.Pool) []stored {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT uuid::text, stream_id, event_type, version, recorded_at, payload::text FROM events
		WHERE split_part(stream_id, '-', 1) IN ('class', 'course', 'partner', 'enrollment')
		ORDER BY transaction_id, "offset"`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []stored
	for rows.Next() {
		var s stored
		var payload string
		if err := rows.Scan(&s.ID, &s.Stream, &s.Type, &s.Version, &s.RecordedAt, &payload); err != nil {
			t.Fatal(err)
		}
		s.Payload = json.RawMessage(payload)
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// received is one message as a consumer decodes it.
type received struct {
	UUID    string
	Meta    message.Metadata
	Payload []byte
	CE      cloudevents.Event
}

// receive takes n messages from ch, acking each, decoding its CloudEvent.
func receive(t *testing.T, ch <-chan *message.Message, n int, within time.Duration) []received {
	t.Helper()
	var out []received
	deadline := time.After(within)
	for len(out) < n {
		select {
		case msg, ok := <-ch:
			if !ok {
				t.Fatalf("subscription closed after %d of %d messages", len(out), n)
			}
			var ce cloudevents.Event
			if err := json.Unmarshal(msg.Payload, &ce); err != nil {
				t.Fatalf("message %s is not a CloudEvent: %v\n%s", msg.UUID, err, msg.Payload)
			}
			out = append(out, received{UUID: msg.UUID, Meta: msg.Metadata, Payload: msg.Payload, CE: ce})
			msg.Ack()
		case <-deadline:
			t.Fatalf("received %d of %d messages within %s", len(out), n, within)
		}
	}
	return out
}

// nothingMore fails if ch holds a message past those received: it renames
// the scenario's class and the next message must be that change. The topic
// is in log order and the rename is the log's last event, so anything the
// forwarder published for an earlier one comes before it.
func nothingMore(t *testing.T, h *harness, s scenario, ch <-chan *message.Message) {
	t.Helper()
	name := "Renamed " + uuid.NewString()[:8]
	h.rename(s, name)
	next := receive(t, ch, 1, 15*time.Second)[0]
	var data struct{ Name string }
	if err := next.CE.DataAs(&data); err != nil || next.CE.Type() != "lectern.class.updated" || data.Name != name {
		t.Fatalf("unexpected extra message %s (%s): %s; want the rename to %q", next.UUID, next.CE.Type(), next.Payload, name)
	}
}

// check asserts that got is want, one CloudEvent per stored event, in order.
func check(t *testing.T, want []stored, got []received) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d messages, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		ce := g.CE
		if g.UUID != w.ID || ce.ID() != w.ID {
			t.Fatalf("message %d: uuid %s, CloudEvent id %s; want the event id %s (%s)", i, g.UUID, ce.ID(), w.ID, w.Type)
		}
		if err := ce.Validate(); err != nil {
			t.Errorf("message %d (%s): not a valid CloudEvent: %v", i, w.Type, err)
		}
		version, err := types.ToInteger(ce.Extensions()[downstream.ExtStreamVersion])
		if err != nil {
			version = -1
		}
		if ce.SpecVersion() != "1.0" || ce.Type() != "lectern."+w.Type || ce.Source() != "/lectern" || ce.Subject() != w.Stream ||
			!ce.Time().Equal(w.RecordedAt) || ce.DataContentType() != "application/json" || int64(version) != w.Version {
			t.Errorf("message %d: specversion %s type %s source %s subject %s time %s datacontenttype %s streamversion %v; want 1.0 lectern.%s /lectern %s %s application/json %d",
				i, ce.SpecVersion(), ce.Type(), ce.Source(), ce.Subject(), ce.Time(), ce.DataContentType(), version,
				w.Type, w.Stream, w.RecordedAt, w.Version)
		}
		if g.Meta.Get("content-type") != "application/cloudevents+json" {
			t.Errorf("message %d: content-type %q", i, g.Meta.Get("content-type"))
		}
		// data is the payload's JSON itself (not data_base64).
		var raw struct{ Data any }
		var wantData any
		if err := json.Unmarshal(g.Payload, &raw); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		_ = json.Unmarshal(w.Payload, &wantData)
		// Invite codes are secrets: only their ids leave the service.
		if fields, ok := wantData.(map[string]any); ok && strings.HasPrefix(w.Type, "class.invite_code_") {
			if code, _ := fields["code"].(string); code == "" {
				t.Fatalf("message %d (%s): the stored event has no code to redact", i, w.Type)
			}
			fields["code"] = downstream.Redacted
		}
		// A partner's contact details are personal: only ids leave.
		if fields, ok := wantData.(map[string]any); ok && w.Type == "partner.created" {
			if name, _ := fields["full_name"].(string); name == "" || name == downstream.Redacted {
				t.Fatalf("message %d (%s): the stored event has no name to redact", i, w.Type)
			}
			fields["full_name"], fields["email"], fields["phone"] = downstream.Redacted, downstream.Redacted, nil
		}
		if !reflect.DeepEqual(raw.Data, wantData) {
			t.Errorf("message %d (%s):\n%s\nwant data: the stored payload (invite codes and contact details redacted)\n%s", i, w.Type, g.Payload, w.Payload)
		}
	}
}

// sqlSubscriber is what docs/subscribing.md shows: a stock watermill-sql
// subscriber on the default schema and offsets adapter. Its messages are
// acked as they arrive: until one is answered, the subscriber holds its
// poll's transaction open, and with it the cluster's visibility horizon, so
// that every projection (this test's service's, and those of the other
// packages' tests) would wait for the test to read on.
func sqlSubscriber(t *testing.T, pool *pgxpool.Pool, group string) <-chan *message.Message {
	t.Helper()
	sub, err := wsql.NewSubscriber(wsql.BeginnerFromPgx(pool), wsql.SubscriberConfig{
		ConsumerGroup:  group,
		SchemaAdapter:  wsql.DefaultPostgreSQLSchema{},
		OffsetsAdapter: wsql.DefaultPostgreSQLOffsetsAdapter{},
		PollInterval:   50 * time.Millisecond,
	}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); _ = sub.Close() })
	ch, err := sub.Subscribe(ctx, downstream.DefaultTopic)
	if err != nil {
		t.Fatal(err)
	}
	acked := make(chan *message.Message, 1024)
	go func() {
		defer close(acked)
		for msg := range ch {
			msg.Ack()
			acked <- msg
		}
	}()
	return acked
}

func kinds(want []stored) []string {
	var out []string
	for _, w := range want {
		out = append(out, w.Type)
	}
	return out
}

// Classroom changes arrive on the PostgreSQL topic as CloudEvents, one per
// class, course, partner and enrollment event and nothing else, in log
// order, with the event ids as ids; a consumer that comes late reads them
// all from the start.
func TestPostgreSQLTopic(t *testing.T) {
	pool := pgtest.Fresh(t)
	h := start(t, pool, service.Config{})
	early := sqlSubscriber(t, pool, "early")
	class := h.classroom()

	want := published(t, pool)
	wantKinds := []string{"partner.created", "course.created", "class.created", "class.invite_code_issued", "class.invite_code_issued",
		"class.updated", "enrollment.created", "enrollment.dropped"}
	if !reflect.DeepEqual(kinds(want), wantKinds) {
		t.Fatalf("the scenario recorded %v, want %v", kinds(want), wantKinds)
	}
	check(t, want, receive(t, early, len(want), 15*time.Second))
	nothingMore(t, h, class, early)

	late := sqlSubscriber(t, pool, "late")
	check(t, want, receive(t, late, len(want), 15*time.Second))

	var ok bool
	if err := pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM projection_offsets WHERE consumer_group = 'downstream')`).Scan(&ok); err != nil || !ok {
		t.Fatalf("the forwarder has no checkpoint of its own (%v)", err)
	}
	if got := h.svc.Downstream.Status(); got.Stalled {
		t.Fatalf("forwarder status %+v", got)
	}
}

// A forwarder that loses its checkpoint (as one that crashed after
// publishing to NATS and before committing) publishes the same events
// again: same ids, same contents, same order, so a consumer that
// deduplicates by id sees each change once.
func TestRedeliveryIsDeduplicableByID(t *testing.T) {
	pool := pgtest.Fresh(t)
	h := start(t, pool, service.Config{})
	sub := sqlSubscriber(t, pool, "dedup")
	h.classroom()
	want := published(t, pool)
	first := receive(t, sub, len(want), 15*time.Second)
	check(t, want, first)

	h.stop() // restarted from an older checkpoint: here, none
	if _, err := pool.Exec(context.Background(), `DELETE FROM projection_offsets WHERE consumer_group = 'downstream'`); err != nil {
		t.Fatal(err)
	}
	start(t, pool, service.Config{})
	again := receive(t, sub, len(want), 15*time.Second)
	check(t, want, again)

	seen := map[string]bool{}
	var once []received
	for _, r := range append(first, again...) {
		if !seen[r.CE.ID()] {
			seen[r.CE.ID()] = true
			once = append(once, r)
		}
	}
	check(t, want, once)
}

// On EventStoreDB the forwarder follows $all with its checkpoint in
// esdb_checkpoints and publishes the same messages to the PostgreSQL topic.
func TestOnEventStoreDB(t *testing.T) {
	url := esdbfake.Start(t)
	pool := pgtest.Fresh(t)
	h := start(t, pool, service.Config{EventStoreURL: url})
	sub := sqlSubscriber(t, pool, "esdb")
	class := h.classroom()

	wantKinds := []string{"partner.created", "course.created", "class.created", "class.invite_code_issued", "class.invite_code_issued",
		"class.updated", "enrollment.created", "enrollment.dropped"}
	got := receive(t, sub, len(wantKinds), 15*time.Second)
	nothingMore(t, h, class, sub)
	versions := map[string]int64{}
	ids := map[string]bool{}
	for i, r := range got {
		version, err := types.ToInteger(r.CE.Extensions()[downstream.ExtStreamVersion])
		if r.CE.Type() != "lectern."+wantKinds[i] || r.UUID != r.CE.ID() || ids[r.CE.ID()] || err != nil || int64(version) != versions[r.CE.Subject()]+1 {
			t.Fatalf("message %d: type %s id %s (uuid %s, seen before: %v) subject %s streamversion %d (%v); want %s, a new id, the next version of its stream",
				i, r.CE.Type(), r.CE.ID(), r.UUID, ids[r.CE.ID()], r.CE.Subject(), version, err, wantKinds[i])
		}
		ids[r.CE.ID()], versions[r.CE.Subject()] = true, int64(version)
	}
	var renamed struct {
		Name    string   `json:"name"`
		Changed []string `json:"changed"`
	}
	if err := got[5].CE.DataAs(&renamed); err != nil || renamed.Name != "Algebra B" || !reflect.DeepEqual(renamed.Changed, []string{"name"}) {
		t.Fatalf("class.updated data %s (%v)", got[5].CE.Data(), err)
	}
	var ok bool
	if err := pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM esdb_checkpoints WHERE consumer_group = 'downstream')`).Scan(&ok); err != nil || !ok {
		t.Fatalf("no EventStoreDB checkpoint of the forwarder (%v)", err)
	}
}

// Messages older than the retention are deleted from the PostgreSQL topic,
// a batch a statement (here two: the three old ones take two statements);
// the rest stay, in order, for consumers old and new.
func TestRetentionTrimsThePostgreSQLTopic(t *testing.T) {
	// Restored in a cleanup registered before start's: cleanups run last
	// first, so the service (whose retention goroutine reads the batch) has
	// stopped by then. A defer would restore it while that goroutine runs.
	t.Cleanup(downstream.SetTrimBatch(2))
	pool := pgtest.Fresh(t)
	ctx := context.Background()
	h := start(t, pool, service.Config{BrokerRetention: time.Hour})
	class := h.classroom()
	want := published(t, pool)
	caughtUp(t, pool)
	// The first three messages were published two hours ago.
	const old = 3
	if _, err := pool.Exec(ctx, `UPDATE watermill_lectern_classroom SET created_at = created_at - interval '2 hours'
		WHERE "offset" IN (SELECT "offset" FROM watermill_lectern_classroom ORDER BY transaction_id, "offset" LIMIT $1)`, old); err != nil {
		t.Fatal(err)
	}
	deleted, err := h.svc.Downstream.Trim(ctx, pool)
	if err != nil || deleted != old {
		t.Fatalf("Trim deleted %d (%v), want the %d messages past the retention", deleted, err, old)
	}
	late := sqlSubscriber(t, pool, "after-trim")
	check(t, want[old:], receive(t, late, len(want)-old, 15*time.Second))
	nothingMore(t, h, class, late)
	if deleted, err := h.svc.Downstream.Trim(ctx, pool); err != nil || deleted != 0 {
		t.Fatalf("a second Trim deleted %d (%v), want none", deleted, err)
	}
}

// Without a retention every message is kept.
func TestNoRetentionKeepsEveryMessage(t *testing.T) {
	pool := pgtest.Fresh(t)
	ctx := context.Background()
	h := start(t, pool, service.Config{})
	h.classroom()
	caughtUp(t, pool)
	if _, err := pool.Exec(ctx, `UPDATE watermill_lectern_classroom SET created_at = created_at - interval '10 years'`); err != nil {
		t.Fatal(err)
	}
	if deleted, err := h.svc.Downstream.Trim(ctx, pool); err != nil || deleted != 0 {
		t.Fatalf("Trim without a retention deleted %d (%v)", deleted, err)
	}
}
