package history_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"lectern/eventstore"
	"lectern/eventstore/esdbfake"
	"lectern/eventstore/postgres"
	"lectern/history"
	"lectern/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func appendEvents(t *testing.T, store eventstore.Store, stream, typ string, at time.Time, data ...string) {
	t.Helper()
	evs := make([]eventstore.EventData, len(data))
	for i, d := range data {
		evs[i] = eventstore.EventData{ID: uuid.New(), Type: typ, SchemaVersion: 1, Data: json.RawMessage(d),
			Metadata: eventstore.Metadata{UserID: 7, RequestID: "r-1"}, RecordedAt: at}
	}
	if _, err := store.Append(context.Background(), stream, eventstore.Any, evs); err != nil {
		t.Fatal(err)
	}
}

// pgStore is a PostgreSQL store on a database of the test's own.
func pgStore(t *testing.T) *postgres.Store {
	t.Helper()
	s := postgres.New(pgtest.Fresh(t), nil)
	t.Cleanup(s.Close)
	return s
}

// stores are the event stores the history reads, each new for the test.
var stores = []struct {
	name string
	open func(t *testing.T) eventstore.Store
}{
	{"postgres", func(t *testing.T) eventstore.Store { return pgStore(t) }},
	{"esdbfake", func(t *testing.T) eventstore.Store { return esdbfake.OpenStore(t) }},
}

func export(t *testing.T, store eventstore.Store, f history.Filter) []history.Line {
	t.Helper()
	var buf bytes.Buffer
	n, err := history.Export(context.Background(), store, &buf, f)
	if err != nil {
		t.Fatal(err)
	}
	var lines []history.Line
	sc := bufio.NewScanner(&buf)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l history.Line
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n != len(lines) {
		t.Errorf("Export reported %d events, wrote %d lines", n, len(lines))
	}
	return lines
}

// summary is what a line's filters are about: stream and version.
func summary(lines []history.Line) []string {
	out := []string{}
	for _, l := range lines {
		out = append(out, fmt.Sprintf("%s@%d", l.Stream, l.Version))
	}
	return out
}

func TestExportFiltersAndRedacts(t *testing.T) {
	t.Parallel()
	onEachStore(t, testExportFiltersAndRedacts)
}

func testExportFiltersAndRedacts(t *testing.T, store eventstore.Store) {
	appendEvents(t, store, "user-1", "user.signed_up", t0,
		`{"user_id":1,"email":"a@example.com","password_hash":"$argon2id$secret","roles":["user"]}`)
	appendEvents(t, store, "agent-1", "agent.created", t0.Add(time.Hour), `{"agent_id":1,"name":"Tutor"}`)
	appendEvents(t, store, "agent-1", "agent.updated", t0.Add(2*time.Hour), `{"agent_id":1,"name":"Coach"}`)
	appendEvents(t, store, "agent-2", "agent.created", t0.Add(3*time.Hour), `{"agent_id":2,"name":"Critic"}`)
	appendEvents(t, store, "agentx-1", "agent.created", t0.Add(3*time.Hour), `{"agent_id":3}`) // another category

	all := export(t, store, history.Filter{})
	if diff := cmp.Diff([]string{"user-1@1", "agent-1@1", "agent-1@2", "agent-2@1", "agentx-1@1"}, summary(all)); diff != "" {
		t.Fatalf("the whole log (-want +got):\n%s", diff)
	}
	first := all[0]
	if got, want := string(first.Data), `{"user_id":1,"email":"a@example.com","password_hash":"[redacted]","roles":["user"]}`; got != want {
		t.Errorf("signed-up data %s, want %s", got, want)
	}
	if first.Type != "user.signed_up" || first.SchemaVersion != 1 || first.RecordedAt != "2026-11-21T10:00:00.000000Z" {
		t.Errorf("first line %+v", first)
	}
	if got, want := string(first.Metadata), `{"user_id":7,"request_id":"r-1"}`; got != want {
		t.Errorf("metadata %s, want %s", got, want)
	}
	if _, err := eventstore.ParsePosition(first.Position); err != nil {
		t.Errorf("position %q: %v", first.Position, err)
	}
	if _, err := uuid.Parse(first.EventID); err != nil {
		t.Errorf("event id %q: %v", first.EventID, err)
	}

	for _, tc := range []struct {
		name string
		f    history.Filter
		want []string
	}{
		{"category", history.Filter{Category: "agent"}, []string{"agent-1@1", "agent-1@2", "agent-2@1"}},
		{"type", history.Filter{Type: "agent.created"}, []string{"agent-1@1", "agent-2@1", "agentx-1@1"}},
		{"stream", history.Filter{Stream: "agent-1"}, []string{"agent-1@1", "agent-1@2"}},
		{"since is inclusive", history.Filter{Since: t0.Add(2 * time.Hour)}, []string{"agent-1@2", "agent-2@1", "agentx-1@1"}},
		{"until is exclusive", history.Filter{Until: t0.Add(2 * time.Hour)}, []string{"user-1@1", "agent-1@1"}},
		{"together", history.Filter{Category: "agent", Type: "agent.created", Since: t0.Add(time.Hour), Until: t0.Add(3 * time.Hour)},
			[]string{"agent-1@1"}},
		{"nothing", history.Filter{Stream: "agent-9"}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, summary(export(t, store, tc.f))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestExportPagesThroughALongLog(t *testing.T) {
	t.Parallel()
	onEachStore(t, testExportPagesThroughALongLog)
}

func testExportPagesThroughALongLog(t *testing.T, store eventstore.Store) {
	// 1 200 events: more than two pages, the first two in one transaction.
	data := make([]string, 1100)
	for i := range data {
		data[i] = fmt.Sprintf(`{"agent_id":1,"n":%d}`, i)
	}
	appendEvents(t, store, "agent-1", "agent.updated", t0, data...)
	for i := range 100 {
		appendEvents(t, store, fmt.Sprintf("agent-%d", i+2), "agent.created", t0, `{}`)
	}
	lines := export(t, store, history.Filter{})
	if len(lines) != 1200 {
		t.Fatalf("exported %d events, want 1200", len(lines))
	}
	prev := eventstore.Position{}
	for i, l := range lines {
		pos, err := eventstore.ParsePosition(l.Position)
		if err != nil {
			t.Fatal(err)
		}
		if pos.Compare(prev) <= 0 {
			t.Fatalf("line %d at %s does not follow %s", i, pos, prev)
		}
		prev = pos
		if i < 1100 && l.Version != int64(i+1) {
			t.Fatalf("line %d is version %d of %s", i, l.Version, l.Stream)
		}
	}
}

func TestExportRefusesAnEmptyTimeRange(t *testing.T) {
	t.Parallel()
	_, err := history.Export(context.Background(), nil, &bytes.Buffer{}, history.Filter{Since: t0, Until: t0})
	if err == nil || !strings.Contains(err.Error(), "--since must be before --until") {
		t.Errorf("error %v", err)
	}
}

// Invite codes are credentials: no export shows one, of any of the three
// events that carry it.
func TestExportRedactsInviteCodes(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, store eventstore.Store) {
		stream := fmt.Sprintf("class-%d", time.Now().UnixNano())
		appendEvents(t, store, stream, "class.invite_code_issued", t0, `{"class_id":1,"invite_code_id":5,"code":"SECRET-1","max_uses":30}`)
		appendEvents(t, store, stream, "class.invite_code_used", t0, `{"class_id":1,"invite_code_id":5,"code":"SECRET-1","used_count":1}`)
		appendEvents(t, store, stream, "class.invite_code_revoked", t0, `{"class_id":1,"invite_code_id":5,"code":"SECRET-1"}`)
		lines := export(t, store, history.Filter{Stream: stream})
		want := []string{
			`{"class_id":1,"invite_code_id":5,"code":"[redacted]","max_uses":30}`,
			`{"class_id":1,"invite_code_id":5,"code":"[redacted]","used_count":1}`,
			`{"class_id":1,"invite_code_id":5,"code":"[redacted]"}`,
		}
		var got []string
		for _, l := range lines {
			got = append(got, string(l.Data))
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("exported data (-want +got):\n%s", diff)
		}
	})
}

// An incremental export starts after the position of the last line of the
// one before, and writes nothing twice.
func TestExportAfterAPosition(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, store eventstore.Store) {
		stream := fmt.Sprintf("agent-%d", time.Now().UnixNano())
		appendEvents(t, store, stream, "agent.created", t0, `{"agent_id":1}`)
		appendEvents(t, store, stream, "agent.updated", t0, `{"agent_id":1}`)
		first := export(t, store, history.Filter{Stream: stream})
		appendEvents(t, store, stream, "agent.updated", t0, `{"agent_id":1}`)
		after, err := eventstore.ParsePosition(first[len(first)-1].Position)
		if err != nil {
			t.Fatal(err)
		}
		more := export(t, store, history.Filter{Stream: stream, After: after})
		if diff := cmp.Diff([]string{stream + "@3"}, summary(more)); diff != "" {
			t.Errorf("the incremental export (-want +got):\n%s", diff)
		}
	})
}

// The CloudEvents export: one structured CloudEvent a line, secrets redacted.
func TestExportCloudEvents(t *testing.T) {
	t.Parallel()
	onEachStore(t, func(t *testing.T, store eventstore.Store) {
		stream := fmt.Sprintf("class-%d", time.Now().UnixNano())
		appendEvents(t, store, stream, "class.invite_code_issued", t0, `{"class_id":1,"code":"SECRET-1"}`)
		var buf bytes.Buffer
		n, err := history.ExportCloudEvents(context.Background(), store, &buf, history.Filter{Stream: stream})
		if err != nil || n != 1 {
			t.Fatalf("export: %d, %v", n, err)
		}
		var ce map[string]any
		if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &ce); err != nil {
			t.Fatalf("%s: %v", buf.String(), err)
		}
		for k, want := range map[string]any{"specversion": "1.0", "source": "/lectern", "type": "lectern.class.invite_code_issued",
			"subject": stream, "datacontenttype": "application/json", "time": "2026-11-21T10:00:00Z", "streamversion": float64(1),
			"schemaversion": float64(1)} {
			if ce[k] != want {
				t.Errorf("%s = %v, want %v", k, ce[k], want)
			}
		}
		if data, ok := ce["data"].(map[string]any); !ok || data["code"] != "[redacted]" {
			t.Errorf("data %v", ce["data"])
		}
		if _, err := eventstore.ParsePosition(fmt.Sprint(ce["position"])); err != nil {
			t.Errorf("position %v: %v", ce["position"], err)
		}
	})
}

// onEachStore runs test, in parallel, on each store of the package.
func onEachStore(t *testing.T, test func(t *testing.T, store eventstore.Store)) {
	t.Helper()
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			test(t, st.open(t))
		})
	}
}
