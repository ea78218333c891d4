package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"lectern/eventstore"
	"lectern/queries"
)

const fewShotsPath = "/user/practice/few-shot-examples"

// createFewShot creates a few-shot example and returns the response.
func (e *env) createFewShot(t testing.TB, token string, body any) response {
	t.Helper()
	res := e.do(t, "POST", fewShotsPath, body, token)
	wantStatus(t, res, http.StatusCreated)
	return res
}

func fewShotPath(t testing.TB, res response) string {
	t.Helper()
	return fewShotsPath + "/" + strconv.FormatInt(num(t, res, "example_id"), 10)
}

// fewShotEvents reads an example's stream from the event store.
func (e *env) fewShotEvents(t testing.TB, id int64) []eventstore.RecordedEvent {
	t.Helper()
	evs, err := e.events(t).ReadStream(context.Background(), eventstore.StreamName("fewshot", id), eventstore.Forwards, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// fewShotJSON is the expected body of an example, in the wire's key order.
// title is nil or a string; meta is the object's compact JSON.
func fewShotJSON(t testing.TB, id, userID int64, input, output string, active bool, createdAt, updatedAt string, title any, meta string) string {
	t.Helper()
	enc := func(v any) string {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	return fmt.Sprintf(`{"example_id":%d,"user_id":%d,"input_text":%s,"output_text":%s,"is_active":%t,"created_at":%q,"updated_at":%q,"title":%s,"meta":%s}`,
		id, userID, enc(input), enc(output), active, createdAt, updatedAt, enc(title), meta)
}

func TestCreateFewShotExample(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)

	res := e.do(t, "POST", fewShotsPath, map[string]any{
		"input_text": "Translate: bonjour", "output_text": "hello", "title": "French greetings",
		"meta":      map[string]any{"lang": "fr", "tags": []string{"greeting"}, "level": 2},
		"is_active": false, "user_id": 999, "example_id": 5,
	}, u.Access)
	wantStatus(t, res, http.StatusCreated)
	if res.Header.Get("X-Event-Position") == "" {
		t.Errorf("%s: no X-Event-Position header", res)
	}
	if p := res.Header.Get("X-Projection-Pending"); p != "" {
		t.Errorf("%s: X-Projection-Pending %q: the read model did not catch up", res, p)
	}
	id := num(t, res, "example_id")
	if id < 1 {
		t.Errorf("example_id is %d, want >= 1", id)
	}
	createdAt := timestamp(t, res, "created_at")
	if updatedAt := timestamp(t, res, "updated_at"); !updatedAt.Equal(createdAt) {
		t.Errorf("updated_at %s, want created_at %s", updatedAt, createdAt)
	}
	if age := time.Since(createdAt); age < 0 || age > time.Minute {
		t.Errorf("created_at %s is not now", createdAt)
	}
	stamp := createdAt.Format(wireTime)
	want := fewShotJSON(t, id, u.ID, "Translate: bonjour", "hello", false, stamp, stamp, "French greetings",
		`{"lang":"fr","level":2,"tags":["greeting"]}`)
	wantBody(t, res, http.StatusCreated, want)

	// Read-your-writes: the reads show it at once.
	wantBody(t, e.do(t, "GET", fewShotPath(t, res), nil, u.Access), http.StatusOK, want)
	wantBody(t, e.do(t, "GET", fewShotsPath, nil, u.Access), http.StatusOK,
		`{"items":[`+want+`],"total":1,"page":1,"size":50}`)

	// The event is the complete fact, with the caller as the owner.
	evs := e.fewShotEvents(t, id)
	if len(evs) != 1 {
		t.Fatalf("the example's stream has %d events, want 1", len(evs))
	}
	if evs[0].Type != "fewshot.created" || evs[0].SchemaVersion != 1 {
		t.Errorf("event %s v%d, want fewshot.created v1", evs[0].Type, evs[0].SchemaVersion)
	}
	var payload any
	if err := json.Unmarshal(evs[0].Data, &payload); err != nil {
		t.Fatal(err)
	}
	wantPayload := map[string]any{"example_id": float64(id), "user_id": float64(u.ID), "title": "French greetings",
		"input_text": "Translate: bonjour", "output_text": "hello", "is_active": false,
		"meta": map[string]any{"lang": "fr", "level": float64(2), "tags": []any{"greeting"}}}
	if diff := cmp.Diff(wantPayload, payload); diff != "" {
		t.Errorf("fewshot.created payload (-want +got):\n%s", diff)
	}
	if !evs[0].RecordedAt.Equal(createdAt) {
		t.Errorf("created_at %s is not the event's recorded time %s", createdAt, evs[0].RecordedAt)
	}
}

func TestCreateFewShotExampleDefaults(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	for _, tc := range []struct {
		name, body, meta string
		title            any
		active           bool
	}{
		{"optional fields omitted", `{"input_text":"i","output_text":"o"}`, `{}`, nil, true},
		{"title and is_active null", `{"input_text":"i","output_text":"o","title":null,"is_active":null}`, `{}`, nil, true},
		{`is_active "no"`, `{"input_text":"i","output_text":"o","is_active":"no"}`, `{}`, nil, false},
		{"is_active 1", `{"input_text":"i","output_text":"o","is_active":1}`, `{}`, nil, true},
		{"an empty title is kept", `{"input_text":"i","output_text":"o","title":""}`, `{}`, "", true},
		{"an empty meta", `{"input_text":"i","output_text":"o","meta":{}}`, `{}`, nil, true},
		{"meta keys are sorted, numbers kept as written",
			`{"input_text":"i","output_text":"o","meta":{"z":12345678901234567890123,"a":{"y":1.50,"b":null}}}`,
			`{"a":{"b":null,"y":1.50},"z":12345678901234567890123}`, nil, true},
		// The read model keeps meta as JSON text, which holds any JSON string.
		{"meta with a NUL character", `{"input_text":"i","output_text":"o","meta":{"k":"a\u0000b"}}`, `{"k":"a\u0000b"}`, nil, true},
		{"unknown fields ignored", `{"input_text":"i","output_text":"o","colour":"red"}`, `{}`, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.createFewShot(t, u.Access, tc.body)
			stamp := str(t, res, "created_at")
			want := fewShotJSON(t, num(t, res, "example_id"), u.ID, "i", "o", tc.active, stamp, stamp, tc.title, tc.meta)
			wantBody(t, res, http.StatusCreated, want)
			wantBody(t, e.do(t, "GET", fewShotPath(t, res), nil, u.Access), http.StatusOK, want)
		})
	}
}

func TestCreateFewShotExampleValidation(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	longText := strings.Repeat("x", 100_001)
	longTitle := strings.Repeat("t", 201)
	for _, tc := range []struct {
		name, body, want string
	}{
		{"input_text missing", `{"output_text":"o","title":"t"}`,
			`{"detail":[{"type":"missing","loc":["body","input_text"],"msg":"Field required","input":{"output_text":"o","title":"t"}}]}`},
		{"output_text missing", `{"input_text":"i"}`,
			`{"detail":[{"type":"missing","loc":["body","output_text"],"msg":"Field required","input":{"input_text":"i"}}]}`},
		{"both texts missing", `{"meta":{}}`,
			`{"detail":[{"type":"missing","loc":["body","input_text"],"msg":"Field required","input":{"meta":{}}},` +
				`{"type":"missing","loc":["body","output_text"],"msg":"Field required","input":{"meta":{}}}]}`},
		{"input_text not a string", `{"input_text":5,"output_text":"o"}`,
			`{"detail":[{"type":"string_type","loc":["body","input_text"],"msg":"Input should be a valid string","input":5}]}`},
		{"input_text null", `{"input_text":null,"output_text":"o"}`,
			`{"detail":[{"type":"string_type","loc":["body","input_text"],"msg":"Input should be a valid string","input":null}]}`},
		{"output_text a list", `{"input_text":"i","output_text":["o"]}`,
			`{"detail":[{"type":"string_type","loc":["body","output_text"],"msg":"Input should be a valid string","input":["o"]}]}`},
		{"title not a string", `{"input_text":"i","output_text":"o","title":1.5}`,
			`{"detail":[{"type":"string_type","loc":["body","title"],"msg":"Input should be a valid string","input":1.5}]}`},
		{"input_text empty", `{"input_text":"","output_text":"o"}`,
			`{"detail":[{"type":"string_too_short","loc":["body","input_text"],"msg":"String should have at least 1 character","input":"","ctx":{"min_length":1}}]}`},
		{"input_text too long", `{"input_text":"` + longText + `","output_text":"o"}`,
			`{"detail":[{"type":"string_too_long","loc":["body","input_text"],"msg":"String should have at most 100000 characters","input":"` + longText[:1000] + `...","ctx":{"max_length":100000}}]}`},
		{"output_text too long", `{"input_text":"i","output_text":"` + longText + `"}`,
			`{"detail":[{"type":"string_too_long","loc":["body","output_text"],"msg":"String should have at most 100000 characters","input":"` + longText[:1000] + `...","ctx":{"max_length":100000}}]}`},
		{"title too long", `{"input_text":"i","output_text":"o","title":"` + longTitle + `"}`,
			`{"detail":[{"type":"string_too_long","loc":["body","title"],"msg":"String should have at most 200 characters","input":"` + longTitle + `","ctx":{"max_length":200}}]}`},
		{"meta a string", `{"input_text":"i","output_text":"o","meta":"x"}`,
			`{"detail":[{"type":"dict_type","loc":["body","meta"],"msg":"Input should be a valid dictionary","input":"x"}]}`},
		{"meta a list", `{"input_text":"i","output_text":"o","meta":[1]}`,
			`{"detail":[{"type":"dict_type","loc":["body","meta"],"msg":"Input should be a valid dictionary","input":[1]}]}`},
		{"meta null", `{"input_text":"i","output_text":"o","meta":null}`,
			`{"detail":[{"type":"dict_type","loc":["body","meta"],"msg":"Input should be a valid dictionary","input":null}]}`},
		{`is_active "maybe"`, `{"input_text":"i","output_text":"o","is_active":"maybe"}`,
			`{"detail":[{"type":"bool_parsing","loc":["body","is_active"],"msg":"Input should be a valid boolean, unable to interpret input","input":"maybe"}]}`},
		{"is_active a list", `{"input_text":"i","output_text":"o","is_active":[]}`,
			`{"detail":[{"type":"bool_type","loc":["body","is_active"],"msg":"Input should be a valid boolean","input":[]}]}`},
		{"blank input_text", `{"input_text":"  ","output_text":"o"}`,
			`{"detail":[{"type":"value_error","loc":["body","input_text"],"msg":"Value error, input_text must not be blank","input":"  ","ctx":{"error":"input_text must not be blank"}}]}`},
		{"blank output_text", `{"input_text":"i","output_text":"\n\t"}`,
			`{"detail":[{"type":"value_error","loc":["body","output_text"],"msg":"Value error, output_text must not be blank","input":"\n\t","ctx":{"error":"output_text must not be blank"}}]}`},
		{"a NUL character", `{"input_text":"a\u0000b","output_text":"o"}`,
			`{"detail":[{"type":"value_error","loc":["body","input_text"],"msg":"Value error, String must not contain NUL characters","input":"a\u0000b","ctx":{"error":"String must not contain NUL characters"}}]}`},
		{"a NUL character in the title", `{"input_text":"i","output_text":"o","title":"\u0000"}`,
			`{"detail":[{"type":"value_error","loc":["body","title"],"msg":"Value error, String must not contain NUL characters","input":"\u0000","ctx":{"error":"String must not contain NUL characters"}}]}`},
		{"body a list", `[]`,
			`{"detail":[{"type":"model_attributes_type","loc":["body"],"msg":"Input should be a valid dictionary or object to extract fields from","input":[]}]}`},
		{"body empty", ``,
			`{"detail":[{"type":"missing","loc":["body"],"msg":"Field required","input":null}]}`},
		{"body not JSON", `{"input_text":`,
			`{"detail":[{"type":"json_invalid","loc":["body",14],"msg":"JSON decode error","input":{},"ctx":{"error":"Expecting value"}}]}`},
		{"every error at once, in schema order", `{"is_active":"maybe","meta":5,"title":7,"output_text":""}`,
			`{"detail":[` +
				`{"type":"missing","loc":["body","input_text"],"msg":"Field required","input":{"is_active":"maybe","meta":5,"title":7,"output_text":""}},` +
				`{"type":"string_too_short","loc":["body","output_text"],"msg":"String should have at least 1 character","input":"","ctx":{"min_length":1}},` +
				`{"type":"string_type","loc":["body","title"],"msg":"Input should be a valid string","input":7},` +
				`{"type":"dict_type","loc":["body","meta"],"msg":"Input should be a valid dictionary","input":5},` +
				`{"type":"bool_parsing","loc":["body","is_active"],"msg":"Input should be a valid boolean, unable to interpret input","input":"maybe"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantBody(t, e.do(t, "POST", fewShotsPath, tc.body, u.Access), http.StatusUnprocessableEntity, tc.want)
		})
	}
	// Nothing was created.
	wantBody(t, e.do(t, "GET", fewShotsPath, nil, u.Access), http.StatusOK, `{"items":[],"total":0,"page":1,"size":50}`)
}

func TestFewShotPathValidation(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	const (
		intParsing = `{"type":"int_parsing","loc":["path","example_id"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"abc"}`
		geOne      = `{"type":"greater_than_equal","loc":["path","example_id"],"msg":"Input should be greater than or equal to 1","input":"0","ctx":{"ge":1}}`
	)
	for _, tc := range []struct {
		method, path string
		body         any
		want         string
	}{
		{"GET", fewShotsPath + "/abc", nil, `{"detail":[` + intParsing + `]}`},
		{"GET", fewShotsPath + "/0", nil, `{"detail":[` + geOne + `]}`},
		{"PATCH", fewShotsPath + "/abc", `{"title":"t"}`, `{"detail":[` + intParsing + `]}`},
		{"PATCH", fewShotsPath + "/0", `{"title":"t"}`, `{"detail":[` + geOne + `]}`},
		{"PATCH", fewShotsPath + "/abc", `{"meta":"x"}`, `{"detail":[` + intParsing +
			`,{"type":"dict_type","loc":["body","meta"],"msg":"Input should be a valid dictionary","input":"x"}]}`},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			wantBody(t, e.do(t, tc.method, tc.path, tc.body, u.Access), http.StatusUnprocessableEntity, tc.want)
		})
	}
}

func TestUpdateFewShotExampleMerges(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	created := e.createFewShot(t, u.Access, `{"input_text":"i","output_text":"o","title":"t","meta":{"k":1}}`)
	path := fewShotPath(t, created)
	id := num(t, created, "example_id")
	createdAt := str(t, created, "created_at")

	example := func(input, output string, active bool, title any, meta, updatedAt string) string {
		t.Helper()
		return fewShotJSON(t, id, u.ID, input, output, active, createdAt, updatedAt, title, meta)
	}
	patch := func(body any) response {
		t.Helper()
		res := e.do(t, "PATCH", path, body, u.Access)
		wantStatus(t, res, http.StatusOK)
		if res.Header.Get("X-Event-Position") == "" {
			t.Errorf("%s: no X-Event-Position header", res)
		}
		// The read model shows the same example at once.
		wantBody(t, e.do(t, "GET", path, nil, u.Access), http.StatusOK, string(res.Body))
		return res
	}

	// Omitted fields keep their values.
	res := patch(`{"input_text":"i2"}`)
	updatedAt := timestamp(t, res, "updated_at")
	if created := timestamp(t, res, "created_at"); !updatedAt.After(created) {
		t.Errorf("updated_at %s is not after created_at %s", updatedAt, created)
	}
	wantBody(t, res, http.StatusOK, example("i2", "o", true, "t", `{"k":1}`, updatedAt.Format(wireTime)))

	// A given meta replaces the whole object.
	res = patch(`{"meta":{"b":[true],"a":"x"},"output_text":"o2","is_active":"off"}`)
	wantBody(t, res, http.StatusOK, example("i2", "o2", false, "t", `{"a":"x","b":[true]}`, str(t, res, "updated_at")))

	// An explicit null resets a field to its default: title to null, meta to
	// {}, is_active to true.
	res = patch(`{"title":null,"meta":null,"is_active":null}`)
	last := example("i2", "o2", true, nil, `{}`, str(t, res, "updated_at"))
	wantBody(t, res, http.StatusOK, last)

	// A PATCH that changes nothing records nothing and keeps updated_at.
	wantBody(t, patch(`{}`), http.StatusOK, last)
	wantBody(t, patch(`{"input_text":"i2","output_text":"o2","title":null,"meta":{},"is_active":true}`), http.StatusOK, last)
	wantBody(t, patch(`{"meta":null,"is_active":null,"colour":"red"}`), http.StatusOK, last)

	// The events: the full new state of every editable field, and what changed.
	evs := e.fewShotEvents(t, id)
	var got []map[string]any
	for _, ev := range evs {
		if ev.Type != "fewshot.created" && ev.Type != "fewshot.updated" {
			t.Errorf("event type %q", ev.Type)
		}
		var p map[string]any
		if err := json.Unmarshal(ev.Data, &p); err != nil {
			t.Fatal(err)
		}
		got = append(got, p)
	}
	want := []map[string]any{
		{"example_id": float64(id), "user_id": float64(u.ID), "title": "t", "input_text": "i", "output_text": "o",
			"meta": map[string]any{"k": float64(1)}, "is_active": true},
		{"example_id": float64(id), "title": "t", "input_text": "i2", "output_text": "o", "meta": map[string]any{"k": float64(1)},
			"is_active": true, "changed": []any{"input_text"}},
		{"example_id": float64(id), "title": "t", "input_text": "i2", "output_text": "o2", "meta": map[string]any{"a": "x", "b": []any{true}},
			"is_active": false, "changed": []any{"output_text", "meta", "is_active"}},
		{"example_id": float64(id), "title": nil, "input_text": "i2", "output_text": "o2", "meta": map[string]any{},
			"is_active": true, "changed": []any{"title", "meta", "is_active"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the example's events (-want +got):\n%s", diff)
	}
}

func TestUpdateFewShotExampleValidation(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	created := e.createFewShot(t, u.Access, `{"input_text":"i","output_text":"o"}`)
	path := fewShotPath(t, created)
	longTitle := strings.Repeat("t", 201)
	nullInput := `{"type":"value_error","loc":["body","input_text"],"msg":"Value error, input_text cannot be null","input":null,"ctx":{"error":"input_text cannot be null"}}`
	nullOutput := `{"type":"value_error","loc":["body","output_text"],"msg":"Value error, output_text cannot be null","input":null,"ctx":{"error":"output_text cannot be null"}}`
	for _, tc := range []struct {
		name, body, want string
	}{
		// The texts have no default to reset to.
		{"input_text null", `{"input_text":null}`, `{"detail":[` + nullInput + `]}`},
		{"output_text null", `{"output_text":null,"title":"t"}`, `{"detail":[` + nullOutput + `]}`},
		{"both texts null", `{"output_text":null,"input_text":null}`, `{"detail":[` + nullInput + `,` + nullOutput + `]}`},
		{"input_text empty", `{"input_text":""}`,
			`{"detail":[{"type":"string_too_short","loc":["body","input_text"],"msg":"String should have at least 1 character","input":"","ctx":{"min_length":1}}]}`},
		{"output_text blank", `{"output_text":"   "}`,
			`{"detail":[{"type":"value_error","loc":["body","output_text"],"msg":"Value error, output_text must not be blank","input":"   ","ctx":{"error":"output_text must not be blank"}}]}`},
		{"input_text not a string", `{"input_text":false}`,
			`{"detail":[{"type":"string_type","loc":["body","input_text"],"msg":"Input should be a valid string","input":false}]}`},
		{"title too long", `{"title":"` + longTitle + `"}`,
			`{"detail":[{"type":"string_too_long","loc":["body","title"],"msg":"String should have at most 200 characters","input":"` + longTitle + `","ctx":{"max_length":200}}]}`},
		{"meta not an object", `{"meta":"x"}`,
			`{"detail":[{"type":"dict_type","loc":["body","meta"],"msg":"Input should be a valid dictionary","input":"x"}]}`},
		{`is_active "maybe"`, `{"is_active":"maybe"}`,
			`{"detail":[{"type":"bool_parsing","loc":["body","is_active"],"msg":"Input should be a valid boolean, unable to interpret input","input":"maybe"}]}`},
		{"every error at once, in schema order", `{"is_active":"maybe","meta":[],"title":5}`,
			`{"detail":[` +
				`{"type":"string_type","loc":["body","title"],"msg":"Input should be a valid string","input":5},` +
				`{"type":"dict_type","loc":["body","meta"],"msg":"Input should be a valid dictionary","input":[]},` +
				`{"type":"bool_parsing","loc":["body","is_active"],"msg":"Input should be a valid boolean, unable to interpret input","input":"maybe"}]}`},
		{"body a list", `[1]`,
			`{"detail":[{"type":"model_attributes_type","loc":["body"],"msg":"Input should be a valid dictionary or object to extract fields from","input":[1]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantBody(t, e.do(t, "PATCH", path, tc.body, u.Access), http.StatusUnprocessableEntity, tc.want)
		})
	}
	// A PATCH needs a body, even though none of its fields is required.
	wantBody(t, e.do(t, "PATCH", path, nil, u.Access), http.StatusUnprocessableEntity,
		`{"detail":[{"type":"missing","loc":["body"],"msg":"Field required","input":null}]}`)

	// Nothing changed.
	wantBody(t, e.do(t, "GET", path, nil, u.Access), http.StatusOK, string(created.Body))
	if n := len(e.fewShotEvents(t, num(t, created, "example_id"))); n != 1 {
		t.Errorf("the example's stream has %d events, want 1", n)
	}
}

func TestFewShotExampleOwnership(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	owner, stranger := e.signUp(t), e.signUp(t)
	created := e.createFewShot(t, owner.Access, `{"input_text":"mine","output_text":"o"}`)
	path := fewShotPath(t, created)

	// Another user's example does not exist for the caller, exactly as an id
	// that does not exist at all.
	for _, p := range []string{path, fewShotsPath + "/999999999"} {
		wantDetail(t, e.do(t, "GET", p, nil, stranger.Access), http.StatusNotFound, "Few-shot example not found")
		wantDetail(t, e.do(t, "PATCH", p, `{"title":"stolen"}`, stranger.Access), http.StatusNotFound, "Few-shot example not found")
		wantDetail(t, e.do(t, "PATCH", p, `{}`, stranger.Access), http.StatusNotFound, "Few-shot example not found")
	}
	wantDetail(t, e.do(t, "GET", fewShotsPath+"/999999999", nil, owner.Access), http.StatusNotFound, "Few-shot example not found")
	wantBody(t, e.do(t, "GET", fewShotsPath, nil, stranger.Access), http.StatusOK, `{"items":[],"total":0,"page":1,"size":50}`)

	// The owner's example is untouched.
	wantBody(t, e.do(t, "GET", path, nil, owner.Access), http.StatusOK, string(created.Body))
	if n := len(e.fewShotEvents(t, num(t, created, "example_id"))); n != 1 {
		t.Errorf("the example's stream has %d events, want 1", n)
	}
}

func TestFewShotExamplesNeedAToken(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	for _, tc := range []struct {
		method, path string
		body         any
	}{
		{"POST", fewShotsPath, `{"input_text":"i","output_text":"o"}`},
		{"GET", fewShotsPath, nil},
		{"GET", fewShotsPath + "/1", nil},
		{"PATCH", fewShotsPath + "/1", `{"title":"t"}`},
		// Authentication comes before validation.
		{"GET", fewShotsPath + "/abc", nil},
		{"GET", fewShotsPath + "?is_active=maybe", nil},
		{"POST", fewShotsPath, `[]`},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			res := e.do(t, tc.method, tc.path, tc.body, "")
			wantDetail(t, res, http.StatusUnauthorized, "Not authenticated")
			wantHeader(t, res, "WWW-Authenticate", "Bearer")

			res = e.do(t, tc.method, tc.path, tc.body, "not-a-token")
			wantDetail(t, res, http.StatusUnauthorized, "Could not validate credentials")
			wantHeader(t, res, "WWW-Authenticate", "Bearer")
		})
	}
}

func TestListFewShotExamples(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u, other := e.signUp(t), e.signUp(t)
	var all, active, inactive []string
	for i := range 5 {
		res := e.createFewShot(t, u.Access, map[string]any{
			"input_text": fmt.Sprintf("in %d", i), "output_text": "out", "is_active": i%2 == 0,
		})
		all = append(all, string(res.Body))
		if i%2 == 0 {
			active = append(active, string(res.Body))
		} else {
			inactive = append(inactive, string(res.Body))
		}
	}
	e.createFewShot(t, other.Access, `{"input_text":"not yours","output_text":"o"}`)

	for _, tc := range []struct {
		query string
		items []string
		total int
		page  int
		size  int
	}{
		{"", all, 5, 1, 50},
		{"?page=1&size=2", all[:2], 5, 1, 2},
		{"?page=3&size=2", all[4:], 5, 3, 2},
		{"?page=4&size=2", nil, 5, 4, 2},
		{"?size=200", all, 5, 1, 200},
		{"?is_active=true", active, 3, 1, 50},
		{"?is_active=false", inactive, 2, 1, 50},
		{"?is_active=yes&size=2&page=2", active[2:], 3, 2, 2},
		{"?is_active=0", inactive, 2, 1, 50},
		{"?is_active=off&size=1", inactive[:1], 2, 1, 1},
	} {
		t.Run(tc.query, func(t *testing.T) {
			want := fmt.Sprintf(`{"items":[%s],"total":%d,"page":%d,"size":%d}`, strings.Join(tc.items, ","), tc.total, tc.page, tc.size)
			wantBody(t, e.do(t, "GET", fewShotsPath+tc.query, nil, u.Access), http.StatusOK, want)
		})
	}

	for _, tc := range []struct {
		query, want string
	}{
		{"?is_active=maybe", `{"detail":[{"type":"bool_parsing","loc":["query","is_active"],"msg":"Input should be a valid boolean, unable to interpret input","input":"maybe"}]}`},
		{"?size=201", `{"detail":[{"type":"less_than_equal","loc":["query","size"],"msg":"Input should be less than or equal to 200","input":"201","ctx":{"le":200}}]}`},
		{"?size=0", `{"detail":[{"type":"greater_than_equal","loc":["query","size"],"msg":"Input should be greater than or equal to 1","input":"0","ctx":{"ge":1}}]}`},
		{"?page=0", `{"detail":[{"type":"greater_than_equal","loc":["query","page"],"msg":"Input should be greater than or equal to 1","input":"0","ctx":{"ge":1}}]}`},
		{"?page=one&is_active=2", `{"detail":[` +
			`{"type":"bool_parsing","loc":["query","is_active"],"msg":"Input should be a valid boolean, unable to interpret input","input":"2"},` +
			`{"type":"int_parsing","loc":["query","page"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"one"}]}`},
	} {
		t.Run(tc.query, func(t *testing.T) {
			wantBody(t, e.do(t, "GET", fewShotsPath+tc.query, nil, u.Access), http.StatusUnprocessableEntity, tc.want)
		})
	}
}

func TestFewShotExampleIdempotencyKey(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	key := uuid.NewString()
	body := `{"input_text":"once","output_text":"o"}`

	first := e.do(t, "POST", fewShotsPath, body, u.Access, "Idempotency-Key", key)
	wantStatus(t, first, http.StatusCreated)
	wantHeader(t, first, "Idempotent-Replayed", "")
	second := e.do(t, "POST", fewShotsPath, body, u.Access, "Idempotency-Key", key)
	wantBody(t, second, http.StatusCreated, string(first.Body))
	wantHeader(t, second, "Idempotent-Replayed", "true")
	wantHeader(t, second, "X-Event-Position", first.Header.Get("X-Event-Position"))
	wantBody(t, e.do(t, "GET", fewShotsPath, nil, u.Access), http.StatusOK,
		`{"items":[`+string(first.Body)+`],"total":1,"page":1,"size":50}`)

	res := e.do(t, "POST", fewShotsPath, `{"input_text":"twice","output_text":"o"}`, u.Access, "Idempotency-Key", key)
	wantBody(t, res, http.StatusUnprocessableEntity, `{"detail":[{"type":"value_error","loc":["header","Idempotency-Key"],`+
		`"msg":"Value error, Idempotency-Key was already used with a different request","input":"`+key+`",`+
		`"ctx":{"error":"Idempotency-Key was already used with a different request"}}]}`)
}

func TestFewShotExampleMinPosition(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	created := e.createFewShot(t, u.Access, `{"input_text":"i","output_text":"o"}`)
	path := fewShotPath(t, created)
	res := e.do(t, "PATCH", path, `{"title":"t"}`, u.Access)
	wantStatus(t, res, http.StatusOK)
	pos := res.Header.Get("X-Event-Position")
	if pos == "" || pos == created.Header.Get("X-Event-Position") {
		t.Fatalf("%s: X-Event-Position %q, want a new position", res, pos)
	}

	got := e.do(t, "GET", path, nil, u.Access, "X-Min-Position", pos)
	wantBody(t, got, http.StatusOK, string(res.Body))
	wantHeader(t, got, "X-Projection-Pending", "")
	got = e.do(t, "GET", fewShotsPath, nil, u.Access, "X-Min-Position", pos)
	wantBody(t, got, http.StatusOK, `{"items":[`+string(res.Body)+`],"total":1,"page":1,"size":50}`)

	// A PATCH that records nothing answers with the position of the last event.
	again := e.do(t, "PATCH", path, `{"title":"t"}`, u.Access)
	wantBody(t, again, http.StatusOK, string(res.Body))
	wantHeader(t, again, "X-Event-Position", pos)

	// A position longer than any (leading zeros: what it says is valid) is
	// refused as unreadable, whatever its length.
	padded := strings.Repeat("0", 42-len(pos)) + pos
	for _, p := range []string{path, fewShotsPath} {
		for _, bad := range []string{"yesterday", padded, strings.Repeat("9", 100_000)} {
			wantDetail(t, e.do(t, "GET", p, nil, u.Access, "X-Min-Position", bad), http.StatusBadRequest, "Invalid X-Min-Position header")
		}
	}
	wantStatus(t, e.do(t, "GET", fewShotsPath, nil, u.Access, "X-Min-Position", padded[1:]), http.StatusOK)
}

// FewShotExamples serves the practice-session settings: the caller's
// examples in the order asked for; ids that are not the caller's are left out.
func TestFewShotExamplesByIDs(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u, other := e.signUp(t), e.signUp(t)
	a := num(t, e.createFewShot(t, u.Access, `{"input_text":"a","output_text":"o"}`), "example_id")
	b := num(t, e.createFewShot(t, u.Access, `{"input_text":"b","output_text":"o","is_active":false,"meta":{"k":[1]}}`), "example_id")
	theirs := num(t, e.createFewShot(t, other.Access, `{"input_text":"c","output_text":"o"}`), "example_id")

	q := queries.New(e.pool)
	for _, tc := range []struct {
		name string
		ids  []int64
		want []string // input texts
	}{
		{"in the order asked for", []int64{b, a}, []string{"b", "a"}},
		{"another user's and missing ids left out", []int64{theirs, a, 999999999}, []string{"a"}},
		{"an id given twice comes twice", []int64{a, b, a}, []string{"a", "b", "a"}},
		{"none", nil, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := q.FewShotExamples(context.Background(), u.ID, tc.ids)
			if err != nil {
				t.Fatal(err)
			}
			texts := []string{}
			for _, x := range got {
				if x.UserID != u.ID {
					t.Errorf("example %d belongs to user %d", x.ID, x.UserID)
				}
				texts = append(texts, x.InputText)
			}
			if diff := cmp.Diff(tc.want, texts); diff != "" {
				t.Errorf("examples (-want +got):\n%s", diff)
			}
		})
	}
	got, err := q.FewShotExamples(context.Background(), u.ID, []int64{b})
	if err != nil || len(got) != 1 {
		t.Fatalf("FewShotExamples: %v, %d examples", err, len(got))
	}
	if x := got[0]; x.IsActive || string(x.Meta) != `{"k":[1]}` || x.Title != nil || x.OutputText != "o" {
		t.Errorf("example %+v, want the inactive one with meta {\"k\":[1]}", x)
	}
}
