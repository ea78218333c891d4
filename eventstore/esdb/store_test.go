package esdb_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"

	"lectern/eventstore"
	"lectern/eventstore/esdb"
	"lectern/eventstore/esdbfake"
	"lectern/eventstore/storetest"
)

func open(t *testing.T, url string) *esdb.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := esdb.Open(ctx, url)
	if err != nil {
		t.Fatalf("Open(%q): %v", url, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Hold stays nil: an EventStoreDB append is atomic on the server, so there is
// no open transaction to commit late.
func TestAcceptanceFake(t *testing.T) {
	url := esdbfake.Start(t)
	storetest.Run(t, storetest.Harness{New: func(t *testing.T) eventstore.Store { return open(t, url) }})
}

func TestAcceptanceEventStoreDB(t *testing.T) {
	url := os.Getenv("EVENTSTORE_TEST_URL")
	if url == "" {
		t.Skip("EVENTSTORE_TEST_URL is not set (e.g. esdb://localhost:2113?tls=false); the fake-server suite ran instead")
	}
	storetest.Run(t, storetest.Harness{New: func(t *testing.T) eventstore.Store { return open(t, url) }})
}

func TestOpenFailsWhenNoServer(t *testing.T) {
	srv, err := esdbfake.New()
	if err != nil {
		t.Fatal(err)
	}
	url := srv.URL()
	srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if s, err := esdb.Open(ctx, url+"&maxDiscoverAttempts=1"); err == nil {
		_ = s.Close()
		t.Fatal("Open succeeded without a server")
	}
}

func TestWrongExpectedVersionIsWrapped(t *testing.T) {
	s := open(t, esdbfake.Start(t))
	ctx := context.Background()
	if _, err := s.Append(ctx, "w-1", eventstore.NoStream, []eventstore.EventData{storetest.Event("a", 1)}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Append(ctx, "w-1", eventstore.Exact(5), []eventstore.EventData{storetest.Event("a", 2)})
	if !errors.Is(err, eventstore.ErrWrongExpectedVersion) {
		t.Fatalf("err = %v, want ErrWrongExpectedVersion", err)
	}
}

func TestIdempotentRetryKeepsPosition(t *testing.T) {
	s := open(t, esdbfake.Start(t))
	ctx := context.Background()
	evs := []eventstore.EventData{storetest.Event("a", 1), storetest.Event("b", 2)}
	first, err := s.Append(ctx, "idem-1", eventstore.NoStream, evs)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Append(ctx, "idem-1", eventstore.NoStream, evs)
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Errorf("retry = %+v, want %+v", again, first)
	}
}

func TestReadAllSkipsSystemEvents(t *testing.T) {
	s := open(t, esdbfake.Start(t))
	ctx := context.Background()
	// A fresh store holds only system events.
	got, err := s.ReadAll(ctx, eventstore.Position{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("fresh store: %d events, want none", len(got))
	}
	e := storetest.Event("x", 1)
	if _, err := s.Append(ctx, "x-1", eventstore.NoStream, []eventstore.EventData{e}); err != nil {
		t.Fatal(err)
	}
	// Limit 1 must step over the system events, not return an empty page.
	got, err = s.ReadAll(ctx, eventstore.Position{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != e.ID {
		t.Fatalf("ReadAll = %+v, want the one event", got)
	}
	rest, err := s.ReadAll(ctx, got[0].Position, 10)
	if err != nil || len(rest) != 0 {
		t.Fatalf("ReadAll after the last event = %v, %v; want empty", rest, err)
	}
}

func TestSchemaVersionAndRecordedAtRoundTrip(t *testing.T) {
	s := open(t, esdbfake.Start(t))
	ctx := context.Background()
	e := eventstore.EventData{
		ID: uuid.New(), Type: "thing.done", SchemaVersion: 3, Data: []byte(`{"a":1}`),
		RecordedAt: time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC),
	}
	if _, err := s.Append(ctx, "rt-1", eventstore.Any, []eventstore.EventData{e}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadStream(ctx, "rt-1", eventstore.Forwards, 1, 0)
	if err != nil || len(got) != 1 {
		t.Fatalf("read: %v, %v", got, err)
	}
	if got[0].SchemaVersion != 3 || !got[0].RecordedAt.Equal(e.RecordedAt) || string(got[0].Data) != `{"a":1}` || got[0].Type != e.Type {
		t.Errorf("read %+v, want %+v", got[0], e)
	}
}

func TestAppendOfNoEventsFails(t *testing.T) {
	s := open(t, esdbfake.Start(t))
	if _, err := s.Append(context.Background(), "e-1", eventstore.Any, nil); err == nil {
		t.Fatal("append of no events succeeded")
	}
}
