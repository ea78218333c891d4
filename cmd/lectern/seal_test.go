package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"lectern/events"
	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/personal"
	"lectern/pgtest"
	"lectern/poll"
)

// `lectern events seal` seals, in place, the personal fields of events
// appended in clear before sealing: afterwards no stored event holds them;
// a user's events read as they were with the data key, an erased user's as
// placeholders; a second run changes nothing; EventStoreDB is refused.
func TestEventsSealSealsTheHistoryInPlace(t *testing.T) {
	pool, url := pgtest.FreshURL(t)
	ctx := context.Background()
	raw := postgres.New(pool, nil)
	defer raw.Close()
	mark := map[int64]string{7: "KEPTMARK", 8: "GONEMARK"}
	type appended struct {
		stream string
		e      events.Event
		sv     int
		data   string
	}
	var history []appended
	for _, u := range []int64{7, 8} {
		m := mark[u]
		history = append(history,
			appended{stream: fmt.Sprintf("user-%d", u), e: events.UserSignedUp{UserID: u, Email: strings.ToLower(m) + "@example.com",
				Name: m + " Name", Roles: []string{"user"}}},
			appended{stream: fmt.Sprintf("agent-%d", u), e: events.AgentCreated{AgentID: u, OwnerID: u, Name: m + " agent",
				SystemPrompt: m + " prompt", IsActive: true}},
			appended{stream: fmt.Sprintf("agent-%d", u), e: events.AgentUpdated{AgentID: u, Name: m + " agent 2",
				SystemPrompt: m + " prompt 2", IsActive: true, Changed: []string{"name"}}},
			// A document uploaded before blobs: its text in the event.
			appended{stream: fmt.Sprintf("knowledge-%d", u), sv: 1, data: fmt.Sprintf(`{"knowledge_id":%d,"user_id":%d,"title":"%s notes",`+
				`"file_name":"n.txt","mime_type":"text/plain","size":9,"content":"%s text","settings":{}}`, u, u, m, m)},
		)
	}
	for _, a := range history {
		data, typ, sv := []byte(a.data), "knowledge.document_uploaded", a.sv
		if a.e != nil {
			var err error
			if data, err = json.Marshal(a.e); err != nil {
				t.Fatal(err)
			}
			typ, sv = a.e.EventType(), a.e.SchemaVersion()
		}
		var actor int64 // the stream's user
		_, _ = fmt.Sscan(a.stream[strings.IndexByte(a.stream, '-')+1:], &actor)
		if _, err := raw.Append(ctx, a.stream, eventstore.Any, []eventstore.EventData{{ID: uuid.New(), Type: typ,
			SchemaVersion: sv, Data: data, Metadata: eventstore.Metadata{UserID: actor}}}); err != nil {
			t.Fatal(err)
		}
	}
	key, _ := hex.DecodeString(cliDataKey)
	keys, err := personal.NewKeys(pool, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Erase(ctx, personal.UserSubject(8)); err != nil {
		t.Fatal(err)
	}
	var before []eventstore.RecordedEvent // once another test's transaction no longer holds the log's horizon back
	poll.Must(t, pgtest.ConsistencyWait, "the history readable", func() bool { return len(readAll(t, raw)) == len(history) })
	before = readAll(t, raw)

	out, err := cli(t, url, nil, "events", "seal")
	if err != nil || !strings.Contains(out, fmt.Sprintf("sealed 8 of %d events", len(before))) {
		t.Fatalf("lectern events seal: %q, %v; want 8 events sealed", out, err)
	}
	stored := readAll(t, raw)
	opened := readAll(t, personal.NewStore(raw, personal.NewSealer(keys)))
	for i, e := range stored {
		if strings.Contains(string(e.Data), "KEPTMARK") || strings.Contains(string(e.Data), "GONEMARK") {
			t.Errorf("stored %s %s still holds personal data: %s", e.Type, e.StreamID, e.Data)
		}
		if e.ID != before[i].ID || e.Position != before[i].Position || e.Version != before[i].Version {
			t.Errorf("%s moved: %v at %s, was %v at %s", e.Type, e.ID, e.Position, before[i].ID, before[i].Position)
		}
		was, now := jsonOf(t, before[i].Data), jsonOf(t, opened[i].Data)
		if strings.HasSuffix(e.StreamID, "-7") {
			if diff := cmp.Diff(was, now); diff != "" {
				t.Errorf("user 7's %s opens otherwise than it was (-was +now):\n%s", e.Type, diff)
			}
		} else if strings.Contains(string(opened[i].Data), "GONEMARK") {
			t.Errorf("erased user 8's %s opens with its data: %s", e.Type, opened[i].Data)
		}
	}

	if out, err := cli(t, url, nil, "events", "seal"); err != nil || !strings.Contains(out, fmt.Sprintf("sealed 0 of %d events", len(before))) {
		t.Errorf("a second run: %q, %v; want nothing sealed", out, err)
	}
	if _, err := cli(t, url, map[string]string{"EVENTSTORE_URL": "esdb://localhost:2113?tls=false"}, "events", "seal"); err == nil ||
		!strings.Contains(err.Error(), "cannot be rewritten") {
		t.Errorf("on EventStoreDB: %v, want a refusal", err)
	}
}

func readAll(t *testing.T, s eventstore.Store) []eventstore.RecordedEvent {
	t.Helper()
	evs, err := s.ReadAll(context.Background(), eventstore.Position{}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func jsonOf(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
