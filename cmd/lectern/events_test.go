package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"lectern/events"
	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/personal"
	"lectern/pgtest"
	"lectern/poll"
)

// An export that is running when a user is erased (by the server, another
// process) reads the user's events with their placeholders from the moment
// the erasure commits, as the server's replicas do: not with the key it
// cached for up to personal.CacheTTL more.
func TestExportHearsAnErasureAtOnce(t *testing.T) {
	pool, url := pgtest.FreshURL(t)
	ctx := context.Background()
	cliEnv(t, url, nil)
	master, _ := hex.DecodeString(cliDataKey)
	serverKeys, err := personal.NewKeys(pool, master)
	if err != nil {
		t.Fatal(err)
	}
	server := personal.NewStore(postgres.New(pool, nil), personal.NewSealer(serverKeys))
	const marker = "ERASEMARK"
	data, _ := json.Marshal(events.AgentCreated{AgentID: 1, OwnerID: 7, Name: marker + " agent", SystemPrompt: marker + " prompt", IsActive: true})
	if _, err := server.Append(ctx, "agent-1", eventstore.NoStream, []eventstore.EventData{{ID: uuid.New(),
		Type: "agent.created", SchemaVersion: 1, Data: data, Metadata: eventstore.Metadata{UserID: 7}}}); err != nil {
		t.Fatal(err)
	}

	opening := time.Now()
	export, closeExport, err := openOpenedEventStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer closeExport()
	if took := time.Since(opening); took >= erasureListenWait {
		t.Errorf("the export took %v to open: it gave up waiting for its listener", took)
	}
	holdsMarker := func() bool {
		evs, err := export.ReadAll(ctx, eventstore.Position{}, 10)
		if err != nil {
			t.Fatal(err)
		}
		return len(evs) == 1 && strings.Contains(string(evs[0].Data), marker)
	}
	// Read once in full: the export caches user 7's key, for CacheTTL from
	// no earlier than now.
	cachedFrom := time.Now()
	poll.Must(t, pgtest.ConsistencyWait, "the export reads the agent's name", holdsMarker)

	erasedAt := time.Now()
	if err := serverKeys.Erase(ctx, personal.UserSubject(7)); err != nil {
		t.Fatal(err)
	}
	erased := poll.Until(personal.CacheTTL/2, func() bool { return !holdsMarker() })
	if !erased {
		t.Fatalf("the export still opened the erased user's events %v after the erasure", time.Since(erasedAt))
	}
	if took := time.Since(cachedFrom); took >= personal.CacheTTL {
		t.Fatalf("the key was cached %v before the export read the erasure: it may have expired, and the test proves nothing", took)
	}
	evs, err := export.ReadAll(ctx, eventstore.Position{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got events.AgentCreated
	if err := json.Unmarshal(evs[0].Data, &got); err != nil {
		t.Fatal(err)
	}
	if got.Name != personal.ErasedText || got.SystemPrompt != personal.ErasedText {
		t.Errorf("after the erasure the export reads %+v, want the placeholders", got)
	}
}
