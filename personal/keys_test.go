package personal_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/events"
	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/personal"
	"lectern/pgtest"
	"lectern/poll"
	"lectern/projections"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func masterKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

// Keys live in PostgreSQL, wrapped: another process with the same master
// key opens what this one sealed; one with another master key cannot; an
// erased subject gets no key again.
func TestKeysInPostgreSQL(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t) // user-41 is erased below, for good
	master := masterKey(t)
	a, err := personal.NewKeys(db, master)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := personal.NewSealer(a).Seal(ctx, "user.signed_up", json.RawMessage(`{"user_id":41,"email":"ann@example.com","name":"Ann"}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	var wrapped []byte
	if err := db.QueryRow(ctx, `SELECT wrapped FROM subject_keys WHERE subject = 'user-41'`).Scan(&wrapped); err != nil || len(wrapped) != 12+32+16 {
		t.Fatalf("the stored key: %d bytes (%v), want a wrapped 32-byte key", len(wrapped), err)
	}

	b, _ := personal.NewKeys(db, master) // another replica
	opened, err := personal.NewSealer(b).Open(ctx, "user.signed_up", sealed)
	if err != nil || !strings.Contains(string(opened), "ann@example.com") {
		t.Fatalf("another replica opened %s, %v", opened, err)
	}
	other, _ := personal.NewKeys(db, masterKey(t))
	if _, err := personal.NewSealer(other).Open(ctx, "user.signed_up", sealed); err == nil || !strings.Contains(err.Error(), "LECTERN_DATA_KEY") {
		t.Errorf("a wrong master key: %v, want an error naming LECTERN_DATA_KEY", err)
	}

	if err := a.Erase(ctx, "user-41"); err != nil {
		t.Fatal(err)
	}
	fresh, _ := personal.NewKeys(db, master) // no cache
	opened, err = personal.NewSealer(fresh).Open(ctx, "user.signed_up", sealed)
	if err != nil || strings.Contains(string(opened), "ann@") || !strings.Contains(string(opened), "erased-user-41@erased.invalid") {
		t.Errorf("after erasure: %s, %v: want the placeholders", opened, err)
	}
	if _, err := fresh.Key(ctx, "user-41", true); !errors.Is(err, personal.ErrErased) {
		t.Errorf("a key for an erased subject: %v, want ErrErased", err)
	}
	if _, err := personal.NewKeys(db, master[:16]); err == nil {
		t.Error("a 16-byte master key was accepted")
	}
}

// A process given another master key finds out at start (Verify), before
// it seals anything under keys no other process could open: the first key
// verified claims the database, even before any subject key exists (a
// database new, or upgraded from before sealing), so that a key file made
// afresh under a misspelt path is refused; the right key passes, and the
// previous one during a rotation, and after the rotation the new one alone.
func TestVerifyTheMasterKey(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	master, other := masterKey(t), masterKey(t)
	a, _ := personal.NewKeys(db, master)
	if err := a.Verify(ctx); err != nil {
		t.Fatalf("the first key on a database: %v", err)
	}
	wrong, _ := personal.NewKeys(db, other)
	refused := func(k *personal.Keys, when string) {
		t.Helper()
		if err := k.Verify(ctx); err == nil || !strings.Contains(err.Error(), "does not open this database's subject keys") {
			t.Errorf("another master key, %s: %v, want refused", when, err)
		}
	}
	refused(wrong, "before any subject key")
	if _, err := a.Key(ctx, "user-7", true); err != nil {
		t.Fatal(err)
	}
	if err := a.Verify(ctx); err != nil {
		t.Errorf("the master key that made the keys: %v", err)
	}
	refused(wrong, "with a subject key")
	rotating, _ := personal.NewRotatingKeys(db, other, master)
	if err := rotating.Verify(ctx); err != nil {
		t.Errorf("during a rotation away from the key that made them: %v", err)
	}
	if _, err := rotating.Rewrap(ctx); err != nil {
		t.Fatal(err)
	}
	rotated, _ := personal.NewKeys(db, other)
	if err := rotated.Verify(ctx); err != nil {
		t.Errorf("the new key alone, after the rotation: %v", err)
	}
	refused(a, "the old key alone, after the rotation")
}

// A database whose subject keys predate the check row is checked against
// its first subject key, then claimed by the key that opens it.
func TestVerifyADatabaseFromBeforeTheCheck(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	master, other := masterKey(t), masterKey(t)
	a, _ := personal.NewKeys(db, master)
	if _, err := a.Key(ctx, "user-7", true); err != nil { // no Verify: as before the check
		t.Fatal(err)
	}
	wrong, _ := personal.NewKeys(db, other)
	if err := wrong.Verify(ctx); err == nil {
		t.Error("another master key claimed a database whose subject keys it cannot open")
	}
	if err := a.Verify(ctx); err != nil {
		t.Errorf("the key of its subject keys: %v", err)
	}
	if err := wrong.Verify(ctx); err == nil {
		t.Error("another master key, once the database is claimed: accepted")
	}
}

// A page of events needs its keys in one statement: after Prefetch, opening
// the page asks the database nothing (its pool is closed), erased subjects
// included.
func TestPrefetchLoadsAPageOfKeys(t *testing.T) {
	ctx := context.Background()
	db, _, err := pgtest.NewDatabase(ctx, pgtest.URL(t)) // closed below
	if err != nil {
		t.Fatal(err)
	}
	master := masterKey(t)
	writer, _ := personal.NewKeys(db, master)
	sealer := personal.NewSealer(writer)
	var page []eventstore.RecordedEvent
	for id := int64(1); id <= 5; id++ {
		data, err := sealer.Seal(ctx, "user.signed_up", json.RawMessage(fmt.Sprintf(`{"user_id":%d,"email":"u%d@example.com","name":"U"}`, id, id)), 0)
		if err != nil {
			t.Fatal(err)
		}
		page = append(page, eventstore.RecordedEvent{Type: "user.signed_up", Data: data})
	}
	page = append(page, eventstore.RecordedEvent{Type: "class.created", Data: json.RawMessage(`{"class_id":1}`)})
	if err := writer.Erase(ctx, "user-3"); err != nil {
		t.Fatal(err)
	}

	reader, _ := personal.NewKeys(db, master) // another process: nothing cached
	if err := personal.NewSealer(reader).Prefetch(ctx, page); err != nil {
		t.Fatal(err)
	}
	db.Close()
	opener := personal.NewSealer(reader)
	for i, ev := range page[:5] {
		opened, err := opener.Open(ctx, ev.Type, ev.Data)
		if err != nil {
			t.Fatalf("event %d after Prefetch, with the database closed: %v", i+1, err)
		}
		want := fmt.Sprintf("u%d@example.com", i+1)
		if i+1 == 3 {
			want = "erased-user-3@erased.invalid"
		}
		if !strings.Contains(string(opened), want) {
			t.Errorf("event %d opened to %s, want %s in it", i+1, opened, want)
		}
	}
}

// A tombstone is cached for good, whichever read found it: after Key met
// the erased subject once, it asks the database nothing (its pool is
// closed) to say so again.
func TestKeyCachesATombstone(t *testing.T) {
	ctx := context.Background()
	db, _, err := pgtest.NewDatabase(ctx, pgtest.URL(t)) // closed below
	if err != nil {
		t.Fatal(err)
	}
	master := masterKey(t)
	writer, _ := personal.NewKeys(db, master)
	if _, err := writer.Key(ctx, "user-5", true); err != nil {
		t.Fatal(err)
	}
	if err := writer.Erase(ctx, "user-5"); err != nil {
		t.Fatal(err)
	}
	reader, _ := personal.NewKeys(db, master) // another replica
	if _, err := reader.Key(ctx, "user-5", false); !errors.Is(err, personal.ErrErased) {
		t.Fatalf("the erased subject's key: %v, want ErrErased", err)
	}
	db.Close()
	for _, create := range []bool{false, true} {
		if _, err := reader.Key(ctx, "user-5", create); !errors.Is(err, personal.ErrErased) {
			t.Errorf("the erased subject's key again (create %v), the database closed: %v, want ErrErased from the cache", create, err)
		}
	}
}

// eraseOnLoad erases subject through keys once, right after a statement
// has loaded its key: between the load and the caching of what it loaded.
type eraseOnLoad struct {
	keys    *personal.Keys
	subject string
	armed   atomic.Bool
	err     error
}

func (e *eraseOnLoad) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (e *eraseOnLoad) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	if strings.HasPrefix(data.CommandTag.String(), "SELECT") && e.armed.CompareAndSwap(true, false) {
		e.err = e.keys.Erase(context.WithoutCancel(ctx), e.subject)
	}
}

// A key loaded just before this process erased its subject is not cached
// after the erasure: the erasure takes effect at once here, as documented.
func TestEraseBeatsAKeyBeingLoaded(t *testing.T) {
	ctx := context.Background()
	_, url := pgtest.FreshURL(t)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	tracer := &eraseOnLoad{subject: "user-9"}
	cfg.ConnConfig.Tracer = tracer
	db, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	master := masterKey(t)
	writer, _ := personal.NewKeys(db, master)
	if _, err := writer.Key(ctx, "user-9", true); err != nil {
		t.Fatal(err)
	}
	keys, _ := personal.NewKeys(db, master)
	tracer.keys = keys
	tracer.armed.Store(true)
	if _, err := keys.Key(ctx, "user-9", false); err != nil {
		t.Fatalf("the key loaded before the erasure: %v", err)
	}
	if tracer.armed.Load() || tracer.err != nil {
		t.Fatalf("the erasure did not run between the load and the caching: %v", tracer.err)
	}
	if _, err := keys.Key(ctx, "user-9", false); !errors.Is(err, personal.ErrErased) {
		t.Fatalf("the key after the erasure: %v, want ErrErased (the key loaded before it was cached)", err)
	}
}

// A subject none of whose data was ever sealed has no key row, and a write
// about them (a dead letter of their event in clear) holds them all the
// same: an erasure waits for the holder's transaction, so that the clean-up
// after it finds what the holder wrote, and a holder that comes while the
// erasure waits sees the subject erased once it has gone through.
func TestAnErasureWaitsForAHolderOfASubjectWithoutKey(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Fresh(t)
	keys, err := personal.NewKeys(pool, masterKey(t))
	if err != nil {
		t.Fatal(err)
	}
	const subject = "partner-4"
	// waiting is how many of the database's backends wait for an advisory lock.
	waiting := func(n int) func() bool {
		return func() bool {
			var got int
			err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory'`).Scan(&got)
			return err == nil && got == n
		}
	}
	first, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Rollback(ctx) }()
	if err := personal.HoldLiveKey(ctx, first, subject); err != nil {
		t.Fatalf("a hold of a subject without key: %v", err)
	}
	erased := make(chan error, 1)
	go func() { erased <- keys.Erase(ctx, subject) }()
	poll.Must(t, 10*time.Second, "the erasure waits for the holder", waiting(1))

	second, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = second.Rollback(ctx) }()
	held := make(chan error, 1)
	go func() { held <- personal.HoldLiveKey(ctx, second, subject) }()
	poll.Must(t, 10*time.Second, "a second holder waits behind the erasure", waiting(2))
	select {
	case err := <-erased:
		t.Fatalf("the erasure ended (%v) while the first holder's transaction was open", err)
	default:
	}

	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-erased; err != nil {
		t.Fatalf("erase: %v", err)
	}
	if err := <-held; !errors.Is(err, personal.ErrSubjectErased) {
		t.Errorf("the hold that waited for the erasure: %v, want ErrSubjectErased", err)
	}
}

// countingTracer counts the statements that read subject_keys.
type countingTracer struct{ n atomic.Int32 }

func (c *countingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, "subject_keys") {
		c.n.Add(1)
	}
	return ctx
}

func (c *countingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// The export's scan of the log loads its keys as a reader of pages does:
// one statement for many events' subjects, erased ones included, not one
// per subject.
func TestScanAllLoadsKeysWithOneStatement(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Fresh(t)
	pg := postgres.New(pool, nil)
	t.Cleanup(pg.Close)
	master := masterKey(t)
	writer, _ := personal.NewKeys(pool, master)
	const users = 60
	for id := int64(1); id <= users; id++ {
		if _, err := personal.NewStore(pg, personal.NewSealer(writer)).Append(ctx, fmt.Sprintf("user-%d", id), eventstore.Any, []eventstore.EventData{
			{ID: uuid.New(), Type: "user.signed_up", SchemaVersion: 1, Metadata: eventstore.Metadata{UserID: id},
				Data: json.RawMessage(fmt.Sprintf(`{"user_id":%d,"email":"u%d@example.com","name":"U"}`, id, id))},
			{ID: uuid.New(), Type: "class.created", SchemaVersion: 1, Data: json.RawMessage(`{"class_id":1}`)},
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := writer.Erase(ctx, personal.UserSubject(7)); err != nil {
		t.Fatal(err)
	}
	poll.Must(t, 10*time.Second, "every event in the log", func() bool {
		all, err := pg.ReadAll(ctx, eventstore.Position{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(all) == 2*users
	})
	end, err := pg.LogEnd(ctx)
	if err != nil {
		t.Fatal(err)
	}

	counter := &countingTracer{}
	cfg := pool.Config()
	cfg.ConnConfig.Tracer = counter
	keysDB, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(keysDB.Close)
	reader, _ := personal.NewKeys(keysDB, master) // nothing cached
	var emails []string
	n, err := personal.NewStore(pg, personal.NewSealer(reader)).ScanAll(ctx, eventstore.Position{}, end, 0, func(e *eventstore.RawEvent) error {
		if string(e.Type) == "user.signed_up" {
			var u struct{ Email string }
			if err := json.Unmarshal(e.Data, &u); err != nil {
				return err
			}
			emails = append(emails, u.Email)
		}
		return nil
	})
	if err != nil || n != 2*users || len(emails) != users {
		t.Fatalf("scanned %d events (%d sign-ups), %v; want %d", n, len(emails), err, 2*users)
	}
	if emails[0] != "u1@example.com" || emails[6] != "erased-user-7@erased.invalid" || emails[users-1] != fmt.Sprintf("u%d@example.com", users) {
		t.Errorf("opened e-mails %v", emails)
	}
	if got := counter.n.Load(); got != 1 {
		t.Errorf("the scan of %d subjects' events read subject_keys with %d statements, want 1", users, got)
	}
}

// A replica that has not heard of an erasure yet (its listener is behind)
// still reads the events after user.erased in the log as erased: decoding
// user.erased drops the key it cached. Such an event was sealed with a key
// cached just before the erasure committed and appended just after it; a
// projection reading it with the cached key would write its values in
// clear after the erasure had anonymised the rows.
func TestDecodingAnErasureForgetsTheKey(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	master := masterKey(t)
	a, _ := personal.NewKeys(db, master) // the replica that erases
	// Replicas that have not heard of it: one per reader of the log, each
	// with the subjects' keys cached (for CacheTTL) before the erasures.
	var replicas [4]*personal.Keys
	for i := range replicas {
		replicas[i], _ = personal.NewKeys(db, master)
		for _, subject := range []string{"user-7", "user-8", "partner-9"} {
			if _, err := replicas[i].Key(ctx, subject, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	seal := func(eventType, data string, actor int64) json.RawMessage {
		sealed, err := personal.NewSealer(a).Seal(ctx, eventType, json.RawMessage(data), actor)
		if err != nil {
			t.Fatal(err)
		}
		return sealed
	}
	agent := func(owner int64) string {
		return fmt.Sprintf(`{"agent_id":%d,"owner_id":%d,"name":"LATEMARK","system_prompt":"LATEMARK","is_active":true}`, owner, owner)
	}
	// Sealed before the erasures, appended after them: user 7's agent, a
	// partner's record (a subject of its own), and user 8's agent, erased
	// by no one.
	type logged struct {
		stream, typ string
		data        json.RawMessage
	}
	history := []logged{
		{"user-7", "user.erased", json.RawMessage(`{"user_id":7,"actor":1}`)},
		{"agent-7", "agent.created", seal("agent.created", agent(7), 7)},
		// User 8's between the erasures: a scan holds it when the second comes.
		{"agent-8", "agent.created", seal("agent.created", agent(8), 8)},
		{"partner-9", "partner.erased", json.RawMessage(`{"partner_id":9,"actor":1}`)},
		{"partner-9", "partner.created", seal("partner.created",
			`{"partner_id":9,"org_id":1,"user_id":null,"full_name":"LATEMARK","email":"latemark@example.com","phone":"LATEMARK","role":"partner","is_active":true}`, 1)},
	}
	for _, subject := range []string{"user-7", "partner-9"} {
		if err := a.Erase(ctx, subject); err != nil {
			t.Fatal(err)
		}
	}
	log := postgres.New(db, nil)
	defer log.Close()
	for _, e := range history {
		if _, err := log.Append(ctx, e.stream, eventstore.Any, []eventstore.EventData{{ID: uuid.New(), Type: e.typ, SchemaVersion: 1,
			Data: e.data}}); err != nil {
			t.Fatal(err)
		}
	}
	poll.Must(t, pgtest.ConsistencyWait, "the log readable", func() bool {
		evs, err := log.ReadAll(ctx, eventstore.Position{}, 10)
		return err == nil && len(evs) == len(history)
	})
	// read checks what a reader read of the log, in order: only user 8's
	// agent holds its values.
	read := func(reader string, evs []eventstore.RecordedEvent) {
		t.Helper()
		if len(evs) != len(history) {
			t.Fatalf("%s: %d events, want %d", reader, len(evs), len(history))
		}
		for i, ev := range evs {
			if kept := strings.Contains(string(ev.Data), "LATEMARK"); kept != (history[i].stream == "agent-8") {
				t.Errorf("%s: %s after the erasures reads %s", reader, history[i].stream, ev.Data)
			}
		}
	}

	decode := func(registry *events.Registry, typ string, data json.RawMessage) eventstore.RecordedEvent {
		v := map[string]func() any{"user.erased": func() any { return new(events.UserErased) },
			"agent.created": func() any { return new(events.AgentCreated) }, "partner.erased": func() any { return new(events.PartnerErased) },
			"partner.created": func() any { return new(events.PartnerCreated) }}[typ]()
		if err := registry.DecodeInto(typ, 1, data, v); err != nil {
			t.Fatal(err)
		}
		return eventstore.RecordedEvent{Data: mustJSON(t, v)}
	}
	// Each replica still holds the erased subjects' keys when its reader
	// starts (not expired: the test would prove nothing). User 7's is
	// opened last, so that a decoder's memo of its last key (KeyMemo)
	// holds it when the log's user.erased comes.
	stillCached := func(i int) {
		t.Helper()
		registry := personal.NewSealer(replicas[i]).Opening(events.NewRegistry())
		for _, late := range []logged{history[4], history[1]} {
			if got := decode(registry, late.typ, late.data); !strings.Contains(string(got.Data), "LATEMARK") {
				t.Fatalf("replica %d no longer holds %s's key (%s): the test proves nothing", i, late.stream, got.Data)
			}
		}
	}

	// A projection's decoder (the registry), event by event.
	stillCached(0)
	registry := personal.NewSealer(replicas[0]).Opening(events.NewRegistry())
	var decoded []eventstore.RecordedEvent
	for _, e := range history {
		decoded = append(decoded, decode(registry, e.typ, e.data))
	}
	read("decoded by a projection", decoded)

	// A replay: pages read in order (one event a page here), decoded out of
	// it: from the last, so that the events after each erasure are decoded
	// before the erasure is.
	stillCached(3)
	replayed := personal.NewSealer(replicas[3])
	pages := personal.NewPrefetching(log, replayed)
	var stored []eventstore.RecordedEvent
	for after := (eventstore.Position{}); len(stored) < len(history); {
		page, err := pages.ReadAll(ctx, after, 1)
		if err != nil || len(page) != 1 {
			t.Fatalf("a page of the log: %d events, %v", len(page), err)
		}
		stored, after = append(stored, page[0]), page[0].Position
	}
	registry = replayed.Opening(events.NewRegistry())
	decoded = make([]eventstore.RecordedEvent, len(stored))
	for i := len(stored) - 1; i >= 0; i-- {
		decoded[i] = decode(registry, stored[i].Type, stored[i].Data)
	}
	read("replayed", decoded)

	// An export's reads (personal.Store): a page, and a scan of the log.
	stillCached(1)
	page := personal.NewStore(log, personal.NewSealer(replicas[1]))
	evs, err := page.ReadAll(ctx, eventstore.Position{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	read("read in a page", evs)
	stillCached(2)
	scanned := personal.NewStore(log, personal.NewSealer(replicas[2]))
	end, err := log.LogEnd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	evs = nil
	if _, err := scanned.ScanAll(ctx, eventstore.Position{}, end, 100, func(e *eventstore.RawEvent) error {
		evs = append(evs, eventstore.RecordedEvent{Data: json.RawMessage(strings.Clone(string(e.Data)))})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	read("scanned", evs)
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// An erasure on one replica reaches the others' key caches when it commits,
// through its notification: they read placeholders at once, not after
// CacheTTL. A replica forgets every key when its listener starts listening
// (again): what was erased meanwhile was not heard.
func TestErasureReachesOtherReplicasAtOnce(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	master := masterKey(t)
	a, _ := personal.NewKeys(db, master)
	b, _ := personal.NewKeys(db, master) // another replica, with its listener
	for _, subject := range []string{"user-7", "user-8", "user-9"} {
		if _, err := a.Key(ctx, subject, true); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Key(ctx, subject, false); err != nil { // cached by b for CacheTTL
			t.Fatal(err)
		}
	}
	// Erased before b listens: unheard.
	if err := a.Erase(ctx, "user-9"); err != nil {
		t.Fatal(err)
	}
	listener := projections.NewListener(db, slog.New(slog.DiscardHandler))
	b.FollowErasures(listener)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	go listener.Run(lctx)
	poll.Must(t, 10*time.Second, "the listener listens", listener.Live)
	if _, err := b.Key(ctx, "user-9", false); !errors.Is(err, personal.ErrErased) {
		t.Errorf("user-9, erased before the listener listened: %v, want erased", err)
	}

	for _, subject := range []string{"user-7", "user-8"} {
		if _, err := b.Key(ctx, subject, false); err != nil { // cached again, for CacheTTL
			t.Fatal(err)
		}
	}
	erasedAt := time.Now()
	if err := a.Erase(ctx, "user-7"); err != nil {
		t.Fatal(err)
	}
	// Well within CacheTTL: the cached key went with the notification.
	erased := poll.Until(personal.CacheTTL/2, func() bool {
		_, err := b.Key(ctx, "user-7", false)
		return errors.Is(err, personal.ErrErased)
	})
	if !erased || time.Since(erasedAt) >= personal.CacheTTL/2 {
		t.Fatalf("the other replica still opened user-7's data %v after the erasure", time.Since(erasedAt))
	}
	if _, err := b.Key(ctx, "user-8", false); err != nil {
		t.Errorf("user-8's key, erased by no one: %v", err)
	}
}
