package history_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/history"
	"lectern/personal"
	"lectern/pgtest"
	"lectern/poll"
)

// paged hides a store's ScanAll: the export then reads it a page at a time
// through ReadAll and encodes its lines with encoding/json.
type paged struct {
	s interface {
		eventstore.Store
		eventstore.LogEnder
	}
}

func (p paged) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, evs []eventstore.EventData) (eventstore.AppendResult, error) {
	return p.s.Append(ctx, stream, expected, evs)
}

func (p paged) ReadStream(ctx context.Context, stream string, dir eventstore.Direction, from int64, limit int) ([]eventstore.RecordedEvent, error) {
	return p.s.ReadStream(ctx, stream, dir, from, limit)
}

func (p paged) ReadAll(ctx context.Context, after eventstore.Position, limit int) ([]eventstore.RecordedEvent, error) {
	return p.s.ReadAll(ctx, after, limit)
}

func (p paged) LogEnd(ctx context.Context) (eventstore.Position, error) { return p.s.LogEnd(ctx) }

// traceParent is a W3C traceparent, as a traced append records it.
const traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// exportFormats are the export's two formats, each compared between the
// paged and the scanned way.
var exportFormats = []struct {
	name   string
	export func(context.Context, eventstore.Store, io.Writer, history.Filter) (int, error)
}{
	{"lines", history.Export},
	{"cloudevents", history.ExportCloudEvents},
}

// The export of the PostgreSQL store scans its log and writes its lines by
// hand: byte for byte what the paged export writes through encoding/json,
// for events opened, erased, redacted, traced and stored in odd shapes, in
// both formats and under every filter.
func TestScannedExportIsThePagedOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Fresh(t)
	pg := postgres.New(pool, nil)
	t.Cleanup(pg.Close)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keys, err := personal.NewKeys(pool, key)
	if err != nil {
		t.Fatal(err)
	}
	store := personal.NewStore(pg, personal.NewSealer(keys))

	// Sealed through the personal store: opened by the export, or, once
	// the subject is erased, their placeholders.
	for id := int64(1); id <= 3; id++ {
		appendEvents(t, store, fmt.Sprintf("user-%d", id), "user.signed_up", t0,
			fmt.Sprintf(`{"user_id":%d,"email":"u%d@example.com","name":"Zoë <b>&</b>","password_hash":"$argon2id$x","roles":["user"]}`, id, id))
		appendEvents(t, store, fmt.Sprintf("agent-%d", id), "agent.created", t0.Add(time.Hour),
			fmt.Sprintf(`{"agent_id":%d,"owner_id":%d,"name":"Tutor \u2028 line","system_prompt":"Be \"kind\"\n","is_active":true}`, id, id))
	}
	// Appended under a traced request: its trace context in the metadata.
	if _, err := store.Append(ctx, "user-4", eventstore.Any, []eventstore.EventData{{ID: uuid.New(), Type: "user.signed_up", SchemaVersion: 1,
		Data:     json.RawMessage(`{"user_id":4,"email":"u4@example.com","name":"Four","password_hash":"h","roles":["user"]}`),
		Metadata: eventstore.Metadata{UserID: 4, RequestID: "r-4", TraceParent: traceParent, TraceState: "lectern=1,vendor=a<b>&c"}, RecordedAt: t0}}); err != nil {
		t.Fatal(err)
	}
	if err := keys.Erase(ctx, personal.UserSubject(2)); err != nil {
		t.Fatal(err)
	}
	// Stored as they are, in shapes the application does not write.
	raw := []struct{ stream, typ, data, meta string }{
		{"user-9", "user.signed_up", "{ \"user_id\" : 9,\n\t\"password_hash\": \"h\" , \"name\":\"a b\" }", `{"user_id":9}`},
		{"user-10", "user.signed_up", `{"user_id":10,"n\u0061me":"x","password_hash":"h"}`, `{"user_id":10}`},
		{"user-11", "user.signed_up", `{"user_id":11,"note":"mentions \"password_hash\" only","x":"<&>"}`, `{}`},
		{"user-12", "user.signed_up", `["not", "an object"]`, `{"user_id":12}`},
		{"user-13", "user.signed_up", `{"user_id":13,"n\u0061me":"x"}`, `{}`},
		{"user-14", "user.signed_up", `{"user_id":14,"<k>":"é"}`, `{}`},
		{"class-1", "class.invite_code_issued", `{"class_id":1, "code":"SECRET","max_uses":3}`, `{"request_id":"r <&> é","actor":"cli:ops"}`},
		{"class-1", "class.invite_code_used", "{\"class_id\":1,\"code\":\"SECRET\",\"emoji\":\"\U0001F600\"}", `{"correlation_id":"c","causation_id":"d","user_id":5,"extra":1}`},
		{"agent-7", "agent.updated", "  {\"a\" : [1, 2, {\"b\": \"x \\\\\\\" y\"}], \"c\": null}  ", `{"user_id":7}`},
		{"agent-7", "agent.renamed", `"a \\ string"`, `{}`},
		{"str\"ange-é", "odd.type<&>", `{"k": "v"}`, `{}`},
		{"agent-8", "agent.created", `null`, `{}`},
		{"agent-9", "agent.created", `{"nested": {"pii":1}, "quoted": "\"pii\":"}`, `{}`},
		{"agent-11", "agent.created", `{"agent_id":11}`, `{"user_id":3,"request_id":"r","actor":"cli:x","traceparent":"` + traceParent + `","tracestate":"k=v,o=<&>"}`},
		{"agent-11", "agent.updated", `{"agent_id":11}`, `{"traceparent":"` + traceParent + `"}`},
		{"agent-11", "agent.renamed", `{"agent_id":11}`, `{"tracestate":"only=\u00e9"}`},
	}
	for i, r := range raw {
		if _, err := pool.Exec(ctx, `INSERT INTO events (uuid, payload, metadata, stream_id, version, event_type, schema_version, recorded_at)
			VALUES ($1, $2, $3, $4, $5, $6, 1, $7)`, uuid.New(), r.data, r.meta, r.stream, 100+i, r.typ, t0.Add(time.Duration(i)*time.Minute+123456*time.Microsecond)); err != nil {
			t.Fatalf("%s: %v", r.data, err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO events (uuid, payload, metadata, stream_id, version, event_type, schema_version, recorded_at)
		VALUES ($1, NULL, '{}', 'agent-10', 1, 'agent.created', 2, $2)`, uuid.New(), t0.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}

	// The log shows an event once every transaction that began before it
	// ended, and the cluster is shared with the package's other tests.
	appended := 6 + 1 + len(raw) + 1
	var all []eventstore.RecordedEvent
	poll.Must(t, 10*time.Second, "every appended event in the log", func() bool {
		if all, err = pg.ReadAll(ctx, eventstore.Position{}, 0); err != nil {
			t.Fatal(err)
		}
		return len(all) == appended
	})
	for _, f := range []history.Filter{
		{},
		{Category: "user"},
		{Category: "agent", Type: "agent.created"},
		{Type: "user.signed_up"},
		{Since: t0.Add(30 * time.Minute)},
		{Until: t0.Add(time.Hour)},
		{After: all[4].Position},
		{Category: "nothing"},
	} {
		for _, format := range exportFormats {
			var want, got bytes.Buffer
			wn, err := format.export(ctx, paged{store}, &want, f)
			if err != nil {
				t.Fatal(err)
			}
			gn, err := format.export(ctx, store, &got, f)
			if err != nil {
				t.Fatal(err)
			}
			if f == (history.Filter{}) && wn != len(all) {
				t.Fatalf("%s: the paged export wrote %d events of %d", format.name, wn, len(all))
			}
			if gn != wn || got.String() != want.String() {
				t.Errorf("%s, filter %+v: scanned %d events, paged %d\n got:\n%s\nwant:\n%s", format.name, f, gn, wn, got.String(), want.String())
			}
			if lines := "[" + strings.ReplaceAll(strings.TrimSpace(got.String()), "\n", ",") + "]"; !json.Valid([]byte(lines)) {
				t.Errorf("%s: lines are not JSON:\n%s", format.name, got.String())
			}
		}
	}
	// What the sealed events export as: opened (the values as they were
	// appended, byte for byte), and erased.
	var out bytes.Buffer
	if _, err := history.Export(ctx, store, &out, history.Filter{Type: "user.signed_up"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"email":"u1@example.com"`, `"email":"erased-user-2@erased.invalid"`, `"name":"Zoë <b>&</b>"`, `"password_hash":"[redacted]"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("export of the sign-ups lacks %s:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), `"pii"`) || strings.Contains(out.String(), "argon2id") {
		t.Errorf("export of the sign-ups shows what it must not:\n%s", out.String())
	}
}

// Every field of eventstore.Metadata, filled, exports from the scanning path
// as encoding/json writes it from the paged one: a field added to Metadata
// and forgotten by the scan's hand-written encoder fails here.
func TestScannedMetadataIsMarshals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := pgStore(t)
	var meta eventstore.Metadata
	v := reflect.ValueOf(&meta).Elem()
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		switch f.Kind() {
		case reflect.String:
			// Each field its own value, with what encoding/json escapes.
			f.SetString(name + ` <&> é "q" \ ` + "\u2028\t")
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			f.SetInt(int64(1000 + i))
		default:
			t.Fatalf("Metadata.%s is a %s: teach this test (and history's appendMetadata) to fill it", name, f.Kind())
		}
	}
	marshalled, err := json.Marshal(meta)
	if err != nil {
		t.Fatal(err)
	}
	for i := range v.NumField() {
		tag, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		if tag == "-" || !strings.Contains(string(marshalled), `"`+tag+`":`) {
			t.Fatalf("Metadata.%s is not in its encoding %s: fill it so that it is", v.Type().Field(i).Name, marshalled)
		}
	}
	if _, err := pg.Append(ctx, "agent-1", eventstore.Any, []eventstore.EventData{
		{ID: uuid.New(), Type: "agent.created", SchemaVersion: 1, Data: json.RawMessage(`{"agent_id":1}`), Metadata: meta, RecordedAt: t0},
		{ID: uuid.New(), Type: "agent.updated", SchemaVersion: 1, Data: json.RawMessage(`{"agent_id":1}`), RecordedAt: t0},
	}); err != nil {
		t.Fatal(err)
	}
	poll.Must(t, 10*time.Second, "both events in the log", func() bool {
		all, err := pg.ReadAll(ctx, eventstore.Position{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(all) == 2
	})
	for _, format := range exportFormats {
		var want, got bytes.Buffer
		if _, err := format.export(ctx, paged{pg}, &want, history.Filter{}); err != nil {
			t.Fatal(err)
		}
		if _, err := format.export(ctx, pg, &got, history.Filter{}); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("%s: the scanned export is not the paged one\n got:\n%s\nwant:\n%s", format.name, got.String(), want.String())
		}
		if format.name == "lines" && !strings.Contains(want.String(), `"metadata":`+string(marshalled)) {
			t.Errorf("the paged export's metadata is not json.Marshal's %s:\n%s", marshalled, want.String())
		}
	}
}
