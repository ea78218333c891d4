package service_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/pgtest"
	"lectern/poll"
	"lectern/projections"
	"lectern/service"
)

// An event a read model cannot apply stops that projection: /readyz names
// it and the event, the dead letter lists it, and an operator's skip starts
// the projection again past it, counted in the metrics.
func TestPoisonEventIsReportedAndSkipped(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Fresh(t)
	svc, base, _ := serve(t, service.Config{Pool: pool})
	ready := func() (int, string) {
		status, _, body, err := send("GET", base+"/readyz", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		return status, string(body)
	}

	// An agent.created that no version of the event decodes.
	poison := uuid.New()
	if _, err := postgres.New(pool, nil).Append(ctx, eventstore.StreamName("agent", 999999), eventstore.NoStream,
		[]eventstore.EventData{{ID: poison, Type: "agent.created", SchemaVersion: 1, Data: []byte(`{"agent_id":"not a number"}`), RecordedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	want := projections.AgentsProjection + " at event " + poison.String()
	poll.Must(t, 30*time.Second, "/readyz 503 naming the stopped projection and its event", func() bool {
		status, body := ready()
		return status == http.StatusServiceUnavailable && strings.Contains(body, want)
	})
	scrape := func() string {
		rec := httptest.NewRecorder()
		svc.Metrics.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	deadLetters := func(status string, n int) string {
		return fmt.Sprintf("lectern_projection_dead_letters{projection=%q,status=%q} %d\n", projections.AgentsProjection, status, n)
	}
	if body := scrape(); !strings.Contains(body, deadLetters("stopped", 1)) || !strings.Contains(body, deadLetters("skipped", 0)) {
		t.Errorf("metrics lack %q and %q", deadLetters("stopped", 1), deadLetters("skipped", 0))
	}
	letters, err := projections.ListDeadLetters(ctx, pool, false)
	if err != nil || len(letters) != 1 || letters[0].Projection != projections.AgentsProjection || letters[0].EventID != poison.String() ||
		letters[0].Status != projections.DeadLetterStopped {
		t.Fatalf("dead letters %+v, %v", letters, err)
	}

	if err := projections.ResolveDeadLetter(ctx, pool, projections.AgentsProjection, poison.String(), projections.DeadLetterSkip, "test"); err != nil {
		t.Fatal(err)
	}
	poll.Must(t, 30*time.Second, "/readyz 200 after the skip", func() bool { status, _ := ready(); return status == http.StatusOK })

	// The skip commits with the projection's offset: wait for that fact.
	poll.Must(t, 30*time.Second, "the dead letter skipped", func() bool {
		letters, err := projections.ListDeadLetters(ctx, pool, true)
		if err != nil {
			t.Fatal(err)
		}
		return len(letters) == 1 && letters[0].Status == projections.DeadLetterSkipped
	})
	body := scrape()
	if line := `lectern_projection_skipped_events_total{projection="` + projections.AgentsProjection + `"} 1`; !strings.Contains(body, line) {
		t.Errorf("metrics lack %q", line)
	}
	for _, line := range []string{deadLetters("stopped", 0), deadLetters("skipped", 1)} {
		if !strings.Contains(body, line) {
			t.Errorf("metrics lack %q", line)
		}
	}
}
