package commands

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"lectern/events"
	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/pgtest"
	"lectern/projections"
)

// bookTitled is a test event at schema version 2; version 1 stored the
// title as "name".
type bookTitled struct {
	BookID int64  `json:"book_id"`
	Title  string `json:"title"`
}

func (bookTitled) EventType() string  { return "test.book_titled" }
func (bookTitled) SchemaVersion() int { return 2 }

// bookRegistry is Lectern's registry with the test type and its v1 → v2 step.
func bookRegistry() *events.Registry {
	r := events.NewRegistry()
	events.Register[bookTitled](r)
	r.RegisterUpcaster("test.book_titled", 1, func(data json.RawMessage) (json.RawMessage, error) {
		var v1 struct {
			BookID int64  `json:"book_id"`
			Name   string `json:"name"`
		}
		if err := json.Unmarshal(data, &v1); err != nil {
			return nil, err
		}
		return json.Marshal(bookTitled{BookID: v1.BookID, Title: v1.Name})
	})
	return r
}

// A v1 event stored before the shape changed is read as v2 by the aggregate
// fold and by a projection alike.
func TestStoredV1EventIsReadAsV2(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Fresh(t)
	store := postgres.New(pool, nil)
	t.Cleanup(store.Close)
	res, err := store.Append(ctx, "book-1", eventstore.NoStream, []eventstore.EventData{{
		ID: uuid.New(), Type: "test.book_titled", SchemaVersion: 1,
		Data: json.RawMessage(`{"book_id":1,"name":"Middlemarch"}`), RecordedAt: time.Now(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	registry := bookRegistry()

	// The fold.
	d := Deps{Store: store, Registry: registry, DB: pool, Now: time.Now, IDs: NewSequences(pool)}
	title, version, _, err := load(ctx, d, "book-1", func(_ string, e events.Envelope) string {
		return e.Event.(bookTitled).Title
	})
	if err != nil {
		t.Fatal(err)
	}
	if title != "Middlemarch" || version != 1 {
		t.Errorf("folded title %q at version %d, want \"Middlemarch\" at 1", title, version)
	}

	// A projection.
	if _, err := pool.Exec(ctx, `CREATE TABLE test_books (id BIGINT PRIMARY KEY, title TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	books := projections.Projection{Name: "test_books", Tables: []string{"test_books"}, Handlers: []projections.GroupHandler{
		projections.On(func(ctx context.Context, tx pgx.Tx, _ events.Meta, e bookTitled) error {
			_, err := tx.Exec(ctx, `INSERT INTO test_books (id, title) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET title = $2`, e.BookID, e.Title)
			return err
		}),
	}}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	runCtx, cancel := context.WithCancel(ctx)
	listener := projections.NewListener(pool, quiet)
	runner := projections.NewRunner(pool, listener, registry, quiet, books)
	runner.MaxAttempts = 1
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); listener.Run(runCtx) }()
	go func() { defer wg.Done(); _ = runner.Run(runCtx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })

	waitCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	if err := listener.WaitFor(waitCtx, res.Position, "test_books"); err != nil {
		t.Fatalf("the projection did not reach %s: %v (statuses %+v)", res.Position, err, runner.Statuses())
	}
	var got string
	if err := pool.QueryRow(ctx, `SELECT title FROM test_books WHERE id = 1`).Scan(&got); err != nil || got != "Middlemarch" {
		t.Errorf("projected title %q (%v), want \"Middlemarch\"", got, err)
	}

	// A replay (lectern replay) rebuilds the table from the v1 event.
	if _, err := pool.Exec(ctx, `UPDATE test_books SET title = 'stale'`); err != nil {
		t.Fatal(err)
	}
	replayer := &projections.Replayer{Pool: pool, Store: store, Registry: registry, Checkpoints: projections.PostgresCheckpoints{}}
	if _, err := replayer.Replay(ctx, books); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT title FROM test_books WHERE id = 1`).Scan(&got); err != nil || got != "Middlemarch" {
		t.Errorf("replayed title %q (%v), want \"Middlemarch\"", got, err)
	}
}
