package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"lectern/eventstore"
	"lectern/poll"
)

// eventItems reads the items of an EventPage.
func eventItems(t testing.TB, res response) []map[string]any {
	t.Helper()
	raw, ok := field(t, res, "items").([]any)
	if !ok {
		t.Fatalf("%s: items is not an array", res)
	}
	out := make([]map[string]any, len(raw))
	for i, it := range raw {
		if out[i], ok = it.(map[string]any); !ok {
			t.Fatalf("%s: item %d is not an object", res, i)
		}
	}
	return out
}

// eventKeys are "type@version" of a page's items.
func eventKeys(items []map[string]any) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, fmt.Sprintf("%v@%v", it["type"], it["version"]))
	}
	return out
}

// eventsEventually reads path until it holds want items: the history shows
// an event once every transaction that began before it has ended (the
// pg_snapshot_xmin horizon), an instant after its write responded.
func eventsEventually(t testing.TB, e *env, path, token string, want int) response {
	t.Helper()
	var res response
	poll.Until(10*time.Second, func() bool {
		res = e.do(t, "GET", path, nil, token)
		wantStatus(t, res, http.StatusOK)
		return len(eventItems(t, res)) >= want
	})
	return res
}

func TestAdminEventsAreForAdmins(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	plain := e.signUp(t)
	for _, path := range []string{"/admin/events", "/admin/events/streams/user-1"} {
		wantDetail(t, e.do(t, "GET", path, nil, ""), http.StatusUnauthorized, "Not authenticated")
		wantDetail(t, e.do(t, "GET", path, nil, plain.Access), http.StatusForbidden, "Not enough permissions")
	}
}

// A sign-up's event holds no password hash (the credentials do): an admin
// reads the account's e-mail and nothing secret.
func TestAdminEventsOfAStreamHoldNoPasswordHash(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	admin := asAdmin(t, e)
	u := e.signUp(t)
	stream := fmt.Sprintf("user-%d", u.ID)

	res := eventsEventually(t, e, "/admin/events/streams/"+stream, admin.Access, 1)
	items := eventItems(t, res)
	if len(items) != 1 {
		t.Fatalf("%s: want the one signed-up event", res)
	}
	if field(t, res, "next") != nil {
		t.Errorf("%s: next is not null at the end of the stream", res)
	}
	ev := items[0]
	if ev["stream"] != stream || ev["type"] != "user.signed_up" || ev["version"] != json.Number("1") || ev["schema_version"] != json.Number("2") {
		t.Errorf("event %v", ev)
	}
	data, ok := ev["data"].(map[string]any)
	if !ok {
		t.Fatalf("data %v is not an object", ev["data"])
	}
	if _, has := data["password_hash"]; has || data["email"] != u.Email {
		t.Errorf("data %v: want the e-mail and no password hash", data)
	}
	if meta, ok := ev["metadata"].(map[string]any); !ok || meta["request_id"] == nil {
		t.Errorf("metadata %v: want the request id", ev["metadata"])
	}
	if _, err := eventstore.ParsePosition(fmt.Sprint(ev["position"])); err != nil {
		t.Errorf("position: %v", err)
	}
	if _, err := uuid.Parse(fmt.Sprint(ev["event_id"])); err != nil {
		t.Errorf("event_id: %v", err)
	}
	if !wireTimePattern.MatchString(fmt.Sprint(ev["recorded_at"])) {
		t.Errorf("recorded_at %v is not in the wire format", ev["recorded_at"])
	}

	// Through the log too, by type.
	res = eventsEventually(t, e, "/admin/events?type=user.signed_up&stream="+stream, admin.Access, 1)
	if got := eventItems(t, res); len(got) != 1 || got[0]["data"].(map[string]any)["email"] != u.Email {
		t.Errorf("%s: want the signed-up event", res)
	}
}

func TestAdminEventsPageByCursorAndFilter(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	admin := asAdmin(t, e)
	owner := e.signUp(t)
	res := e.do(t, "POST", "/agents", map[string]any{"name": "Tutor", "system_prompt": "Be kind."}, owner.Access)
	wantStatus(t, res, http.StatusCreated)
	agent := num(t, res, "agent_id")
	for _, name := range []string{"Coach", "Critic"} {
		wantStatus(t, e.do(t, "PATCH", fmt.Sprintf("/agents/%d", agent), map[string]any{"name": name}, owner.Access), http.StatusOK)
	}
	stream := fmt.Sprintf("agent-%d", agent)
	all := eventsEventually(t, e, "/admin/events/streams/"+stream, admin.Access, 3)
	if diff := cmp.Diff([]string{"agent.created@1", "agent.updated@2", "agent.updated@3"}, eventKeys(eventItems(t, all))); diff != "" {
		t.Fatalf("the stream (-want +got):\n%s", diff)
	}

	// One at a time, following next.
	var paged []map[string]any
	path := "/admin/events/streams/" + stream + "?limit=1"
	for range 4 {
		res := e.do(t, "GET", path, nil, admin.Access)
		wantStatus(t, res, http.StatusOK)
		paged = append(paged, eventItems(t, res)...)
		next, ok := field(t, res, "next").(string)
		if !ok {
			break
		}
		path = "/admin/events/streams/" + stream + "?limit=1&after=" + url.QueryEscape(next)
	}
	if diff := cmp.Diff(eventItems(t, all), paged); diff != "" {
		t.Errorf("paged one at a time (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"category=agent&stream=" + stream, []string{"agent.created@1", "agent.updated@2", "agent.updated@3"}},
		{"type=agent.updated&stream=" + stream, []string{"agent.updated@2", "agent.updated@3"}},
		{"category=user&stream=" + stream, []string{}},
		{"stream=" + stream + "&after=" + url.QueryEscape(fmt.Sprint(eventItems(t, all)[1]["position"])), []string{"agent.updated@3"}},
		// The second event's recorded time: since includes it, until does not.
		{"stream=" + stream + "&since=" + url.QueryEscape(fmt.Sprint(eventItems(t, all)[1]["recorded_at"])), []string{"agent.updated@2", "agent.updated@3"}},
		{"stream=" + stream + "&until=" + url.QueryEscape(fmt.Sprint(eventItems(t, all)[1]["recorded_at"])), []string{"agent.created@1"}},
		{"stream=" + stream + "&since=" + url.QueryEscape(fmt.Sprint(eventItems(t, all)[1]["recorded_at"])) +
			"&until=" + url.QueryEscape(fmt.Sprint(eventItems(t, all)[2]["recorded_at"])), []string{"agent.updated@2"}},
	} {
		res := e.do(t, "GET", "/admin/events?"+tc.query, nil, admin.Access)
		wantStatus(t, res, http.StatusOK)
		if diff := cmp.Diff(tc.want, eventKeys(eventItems(t, res))); diff != "" {
			t.Errorf("?%s (-want +got):\n%s", tc.query, diff)
		}
	}

	// The whole log, a page of the default size, holds the agent's events in order.
	res = e.do(t, "GET", "/admin/events?category=agent&limit=1000", nil, admin.Access)
	wantStatus(t, res, http.StatusOK)
	if items := eventItems(t, res); len(items) == 0 || len(items) > 1000 {
		t.Errorf("%s: %d items", res, len(items))
	}
}

func TestAdminEventsRejectBadQueries(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	admin := asAdmin(t, e)
	wantBody(t, e.do(t, "GET", "/admin/events?after=yesterday", nil, admin.Access), http.StatusUnprocessableEntity,
		`{"detail":[{"type":"value_error","loc":["query","after"],"msg":"Value error, after must be a position cursor such as \"1234-56\"","input":"yesterday","ctx":{"error":"after must be a position cursor such as \"1234-56\""}}]}`)
	// A cursor of the other store: on EventStoreDB, a commit inside one of
	// its records (the first event's position plus one; records follow it)
	// or a prepare past the commit is no position of its log, and no retry
	// changes that; on PostgreSQL every such pair is one (a transaction id
	// and an offset).
	e.signUp(t) // a record after the first event
	first, err := eventstore.ParsePosition(fmt.Sprint(eventItems(t, eventsEventually(t, e, "/admin/events?limit=1", admin.Access, 1))[0]["position"]))
	if err != nil {
		t.Fatal(err)
	}
	for _, after := range []string{fmt.Sprintf("%d-6", first.Commit+1), "500-900"} {
		res := e.do(t, "GET", "/admin/events?after="+after, nil, admin.Access)
		if eventStoreURL(t) == "" {
			wantStatus(t, res, http.StatusOK)
			continue
		}
		wantBody(t, res, http.StatusUnprocessableEntity, fmt.Sprintf(
			`{"detail":[{"type":"value_error","loc":["query","after"],"msg":"Value error, after is not a position of this event log","input":%q,"ctx":{"error":"after is not a position of this event log"}}]}`, after))
	}
	// Past the end of the log (a cursor of a longer one), either store reads
	// an empty page, as EventStoreDB reads nothing past its last record.
	wantBody(t, e.do(t, "GET", "/admin/events?after=9223372036854775000-0", nil, admin.Access), http.StatusOK, `{"items":[],"next":null}`)
	// A cursor longer than any position (leading zeros) is refused as unreadable.
	wantStatus(t, e.do(t, "GET", "/admin/events?after="+strings.Repeat("0", 40)+"1-1", nil, admin.Access), http.StatusUnprocessableEntity)
	wantStatus(t, e.do(t, "GET", "/admin/events?since=yesterday", nil, admin.Access), http.StatusUnprocessableEntity)
	wantStatus(t, e.do(t, "GET", "/admin/events?since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z", nil, admin.Access),
		http.StatusUnprocessableEntity)
	for _, limit := range []string{"0", "1001", "x"} {
		res := e.do(t, "GET", "/admin/events/streams/user-1?limit="+limit, nil, admin.Access)
		wantStatus(t, res, http.StatusUnprocessableEntity)
	}
}

// EventStoreDB's own streams ($settings, $$-metadata, ...) are not Lectern's
// history: they read as streams with no events, on either store, as the
// log's $-typed events are left out of GET /admin/events.
func TestAdminEventsOfASystemStreamAreNone(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	admin := asAdmin(t, e)
	for _, stream := range []string{"$settings", "$$user-1", "$et-user.signed_up"} {
		wantBody(t, e.do(t, "GET", "/admin/events/streams/"+url.PathEscape(stream), nil, admin.Access), http.StatusOK, `{"items":[],"next":null}`)
	}
}
