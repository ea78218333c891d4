package personal

import (
	"bytes"
	"context"
	"crypto/cipher"
	"encoding/base64"
	"encoding/json"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"lectern/events"
)

// newEvent makes a new event of each type a rule names: the Go types that
// OpenInto decodes into.
var newEvent = map[string]func() any{
	"user.signed_up":              func() any { return new(events.UserSignedUp) },
	"agent.created":               func() any { return new(events.AgentCreated) },
	"agent.updated":               func() any { return new(events.AgentUpdated) },
	"fewshot.created":             func() any { return new(events.FewShotCreated) },
	"fewshot.updated":             func() any { return new(events.FewShotUpdated) },
	"partner.created":             func() any { return new(events.PartnerCreated) },
	"promotion.requested":         func() any { return new(events.PromotionRequested) },
	"promotion.rejected":          func() any { return new(events.PromotionRejected) },
	"session.started":             func() any { return new(events.SessionStarted) },
	"session.turn_recorded":       func() any { return new(events.SessionTurnRecorded) },
	"session.settings_updated":    func() any { return new(events.SessionSettingsUpdated) },
	"knowledge.document_uploaded": func() any { return new(events.KnowledgeDocumentUploaded) },
	"knowledge.settings_changed":  func() any { return new(events.KnowledgeSettingsChanged) },
}

// Every rule's fields are found in its event's Go type: otherwise OpenInto
// would leave every event of the type to Open, and a replay would pay.
func TestEveryRuleHasAPlan(t *testing.T) {
	if diff := cmp.Diff(slices.Sorted(maps.Keys(rules)), slices.Sorted(maps.Keys(newEvent))); diff != "" {
		t.Fatalf("rules and the test's event types differ (-rules +test):\n%s", diff)
	}
	for typ, mk := range newEvent {
		if planFor(typ, reflect.TypeOf(mk()).Elem()) == nil {
			t.Errorf("%s: no plan for %T", typ, mk())
		}
	}
}

// erasedKeys is the key source once every subject is erased.
type erasedKeys struct{}

func (erasedKeys) Key(context.Context, string, bool) (cipher.AEAD, error) { return nil, ErrErased }

// intoCases are events of every type with personal fields, in the shapes
// each may take: values with escapes and non-ASCII text, nulls, members
// left out, nested objects that are null or lack the field, arrays with an
// element that lacks it.
var intoCases = []struct{ eventType, data string }{
	{"user.signed_up", `{"user_id":7,"email":"m@example.com","name":"Zoë \"Z\" O'Neil\n\u00e9\u2028","roles":["user"]}`},
	{"agent.created", `{"agent_id":3,"owner_id":7,"name":"Tutor","system_prompt":"Be kind.\tAlways.","role_description":"r","template_source":null,"is_active":true}`},
	{"agent.created", `{"agent_id":3,"owner_id":7,"name":"","system_prompt":"\\","is_active":false}`},
	{"agent.updated", `{"agent_id":3,"name":"n","system_prompt":"p","role_description":null,"template_source":"t","is_active":true,"changed":["name"]}`},
	{"fewshot.created", `{"example_id":2,"user_id":7,"title":"T","input_text":"2+2?","output_text":"4","meta":{"note":"x","n":[1,2]},"is_active":true}`},
	{"fewshot.created", `{"example_id":2,"user_id":7,"title":null,"input_text":"i","output_text":"o","meta":null,"is_active":true}`},
	{"fewshot.updated", `{"example_id":2,"title":"T","input_text":"i","output_text":"o","meta":{},"is_active":true,"changed":["title"]}`},
	{"partner.created", `{"partner_id":6,"org_id":1,"user_id":null,"full_name":"F","email":"p@example.com","phone":"+33 1","role":"partner","is_active":true}`},
	{"promotion.requested", `{"request_id":8,"user_id":7,"name":"N","email":"e@example.com","org_name":"O","target_role":"partner","edu_category":null}`},
	{"promotion.rejected", `{"request_id":8,"user_id":7,"reviewed_by":1,"reason":"Not yet"}`},
	{"session.started", `{"session_id":12,"user_id":7,"title":"T","settings":{"setting_id":1,"style_params":{},"agent_snapshot":{"agent_id":3,"name":"A","system_prompt":"S"},"few_shot_links":[]}}`},
	{"session.started", `{"session_id":12,"user_id":7,"title":null,"settings":{"setting_id":1,"agent_snapshot":null}}`},
	{"session.started", `{"session_id":12,"user_id":7,"settings":{"setting_id":1}}`},
	{"session.started", `{"session_id":12,"user_id":7,"settings":null}`},
	{"session.turn_recorded", `{"session_id":12,"turn":1,"prompt_text":"Q?","messages":[{"role":"system","content":"S"},{"role":"user","content":"Q\u00e9?"}],"results":[{"model_name":"echo","response_text":"A"},{"model_name":"echo-reverse","response_text":"\"B\""}]}`},
	{"session.turn_recorded", `{"session_id":12,"turn":2,"prompt_text":"Q","messages":[],"results":[{"model_name":"echo","response_text":""},{"model_name":"down","error":{"kind":"timeout"}}]}`},
	{"session.turn_recorded", `{"session_id":12,"turn":3,"prompt_text":"Q","messages":null,"results":null}`},
	{"session.settings_updated", `{"session_id":12,"settings":{"setting_id":2,"agent_snapshot":{"agent_id":3,"name":"A","system_prompt":"S"}},"changed":["agent_id"]}`},
	{"knowledge.document_uploaded", `{"knowledge_id":4,"user_id":7,"title":"Doc","content_type":"text/plain","size":3,"content_hash":"ab","content_size":3}`},
	{"knowledge.settings_changed", `{"knowledge_id":4,"settings":{"top_k":5,"min_score":"0","score_type":"cosine_similarity","reranker_enabled":true,"reranker_model":"Ann's \u00e9 model","reranker_top_n":3},"changed":["reranker_model"]}`},
	{"knowledge.settings_changed", `{"knowledge_id":4,"settings":{"top_k":5,"min_score":"0","score_type":"cosine_similarity","reranker_enabled":false,"reranker_model":null,"reranker_top_n":3},"changed":["top_k"]}`},
}

// OpenInto takes every event of a rule, live or erased, and decodes it to
// what decoding Open's result gives, field for field.
func TestOpenIntoDecodesAsOpen(t *testing.T) {
	live, _ := zeroKeySealer()
	ctx := context.Background()
	seen := map[string]bool{}
	for _, c := range intoCases {
		seen[c.eventType] = true
		sealed, err := live.Seal(ctx, c.eventType, json.RawMessage(c.data), 7)
		if err != nil {
			t.Fatalf("%s: seal: %v", c.data, err)
		}
		for _, s := range []*Sealer{live, NewSealer(erasedKeys{})} {
			want, got := decodeBothWays(t, s, c.eventType, sealed)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s (erased: %v): OpenInto differs from Open (-open +into):\n%s", c.data, s != live, diff)
			}
		}
	}
	if len(seen) != len(rules) {
		t.Errorf("cases cover %d of %d event types", len(seen), len(rules))
	}
}

// decodeBothWays decodes sealed through a registry that opens with Open
// only, and through one that opens as the service's does (OpenInto first),
// each at the type's current schema version; OpenInto must take the event.
func decodeBothWays(t *testing.T, s *Sealer, eventType string, sealed []byte) (opened, into any) {
	t.Helper()
	ctx := context.Background()
	openOnly := events.NewRegistry().OpenWith(func(typ string, data json.RawMessage) (json.RawMessage, error) {
		return s.Open(ctx, typ, data)
	})
	opened, into = newEvent[eventType](), newEvent[eventType]()
	version := opened.(events.Event).SchemaVersion()
	if err := openOnly.DecodeInto(eventType, version, sealed, opened); err != nil {
		t.Fatalf("%s: open and decode: %v", sealed, err)
	}
	if err := s.Opening(events.NewRegistry()).DecodeInto(eventType, version, sealed, into); err != nil {
		t.Fatalf("%s: decode through OpenInto: %v", sealed, err)
	}
	if handled, err := s.OpenInto(ctx, eventType, sealed, newEvent[eventType]()); !handled || err != nil {
		t.Fatalf("%s: OpenInto = %v, %v; want it taken", sealed, handled, err)
	}
	if _, _, _, leading := leadingEnvelope(sealed); leading {
		// As sealing wrote it before: the envelope last.
		last := trailingLayout(t, sealed)
		if _, _, ok := trailingEnvelope(last); !ok {
			t.Fatalf("%s: no trailing envelope", last)
		}
		lastOpened, lastInto := decodeBothWays(t, s, eventType, last)
		if diff := cmp.Diff(opened, lastOpened); diff != "" {
			t.Errorf("%s: opened with its envelope last differs (-first +last):\n%s", sealed, diff)
		}
		if diff := cmp.Diff(into, lastInto); diff != "" {
			t.Errorf("%s: OpenInto with its envelope last differs (-first +last):\n%s", sealed, diff)
		}
	}
	return opened, into
}

// trailingLayout is sealed, its envelope first as sealing writes it, with
// its envelope last, as sealing wrote it before: events stored so are read
// all the same.
func trailingLayout(t testing.TB, sealed []byte) []byte {
	t.Helper()
	_, _, after, ok := leadingEnvelope(sealed)
	if !ok {
		t.Fatalf("%s: no envelope first", sealed)
	}
	end := len(sealed) - len(after)
	if string(after) == "}" {
		return sealed // the envelope alone: first is last
	}
	env := sealed[len(`{"pii":`) : end-1] // less the comma after it
	return []byte("{" + string(after[:len(after)-1]) + `,"pii":` + string(env) + "}")
}

// Every event type that holds personal fields gives back, sealed then
// opened (both ways), every value it was given: each of its texts, at any
// depth, set to what a user might type.
func FuzzSealingLosesNothing(f *testing.F) {
	for _, seed := range [][2]string{
		{"plain", "text"}, {`"pii":{"sub":"user-1","ct":"AA=="}}`, `\u0000 \" }`}, {"\xff\xfe", "[erased]"}, {"", "user-7"},
	} {
		f.Add(seed[0], seed[1])
	}
	s, _ := zeroKeySealer()
	types := slices.Sorted(maps.Keys(newEvent))
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, eventType := range types {
			ev := newEvent[eventType]()
			n := 0
			fillEvent(reflect.ValueOf(ev).Elem(), []string{a, b}, &n)
			sealsWhole(t, s, eventType, ev)
		}
	})
}

// fillEvent sets every field of v it can reach: texts in turn to each
// string (and JSON object) field, 7 to each number (ids are subjects),
// two elements to each slice.
func fillEvent(v reflect.Value, texts []string, n *int) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(texts[*n%len(texts)])
		*n++
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(0.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillEvent(v.Elem(), texts, n)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillEvent(v.Field(i), texts, n)
			}
		}
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			obj, _ := json.Marshal(map[string]string{texts[*n%len(texts)]: texts[(*n+1)%len(texts)]})
			*n++
			v.SetBytes(obj)
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fillEvent(v.Index(i), texts, n)
		}
	}
}

// sealsWhole seals ev, of eventType, with s, and fails t unless both ways
// of opening it (Open, OpenInto) decode to the same event, and that event
// is what ev's JSON decodes to: no value a user typed is lost or changed by
// sealing and opening.
func sealsWhole(t *testing.T, s *Sealer, eventType string, ev any) {
	t.Helper()
	data, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := s.Seal(context.Background(), eventType, data, 7)
	if err != nil {
		t.Fatal(err)
	}
	opened, into := decodeBothWays(t, s, eventType, sealed)
	if diff := cmp.Diff(opened, into); diff != "" {
		t.Errorf("%s: OpenInto differs from Open (-open +into):\n%s", eventType, diff)
	}
	given := newEvent[eventType]()
	if err := json.Unmarshal(data, given); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(given, opened); diff != "" {
		t.Errorf("%s: opened differs from what was sealed (-sealed +opened):\n%s", eventType, diff)
	}
}

// What OpenInto does not expect it leaves to Open, with the event still
// zero: data that was never sealed, a "pii" member that is not the top
// level's, an array whose elements no longer match the sealed values, a
// value its field cannot hold, a type it has no plan for.
func TestOpenIntoLeavesTheRestToOpen(t *testing.T) {
	s, _ := zeroKeySealer()
	ctx := context.Background()
	turn, err := s.Seal(ctx, "session.turn_recorded", json.RawMessage(`{"session_id":1,"turn":1,"prompt_text":"Q","messages":[],"results":[{"response_text":"A"},{"response_text":"B"}]}`), 7)
	if err != nil {
		t.Fatal(err)
	}
	oneResultLess := strings.Replace(string(turn), `{"response_text":"[erased]"},`, "", 1)
	agent, err := s.Seal(ctx, "agent.created", json.RawMessage(`{"agent_id":3,"owner_id":7,"name":"N","system_prompt":"P","is_active":true}`), 7)
	if err != nil {
		t.Fatal(err)
	}
	nestedPII := `{"session_id":1,"settings":{"setting_id":1,"style_params":{"pii":{"sub":"user-7","ct":"AAAA"}}}}`
	type wrongType struct {
		Name int `json:"name"`
	}
	for _, c := range []struct {
		name, eventType, data string
		v                     any
	}{
		{"never sealed", "agent.created", `{"agent_id":3,"owner_id":7,"name":"N","system_prompt":"P"}`, new(events.AgentCreated)},
		{"no rule", "class.created", string(agent), new(events.AgentCreated)},
		{"a nested pii member", "session.started", nestedPII, new(events.SessionStarted)},
		{"elements changed", "session.turn_recorded", oneResultLess, new(events.SessionTurnRecorded)},
		{"a value its field cannot hold", "agent.created", string(agent), new(wrongType)},
		{"not a struct", "agent.created", string(agent), new(map[string]any)},
		{"not valid JSON", "agent.created", string(agent) + "}", new(events.AgentCreated)},
	} {
		handled, err := s.OpenInto(ctx, c.eventType, []byte(c.data), c.v)
		if handled || err != nil {
			t.Errorf("%s: OpenInto = %v, %v; want it left to Open", c.name, handled, err)
		}
		if !reflect.ValueOf(c.v).Elem().IsZero() {
			t.Errorf("%s: OpenInto left %+v, want it zero", c.name, c.v)
		}
	}
}

// Sealed values that sealing would not have written still decode as Open
// has them: a member of no rule goes nowhere, an empty object of values puts
// nothing, a nested field's name in another case matches no field. (Each
// value's member holds its placeholder, as sealing writes them: OpenInto
// relies on it.)
func TestOpenIntoTakesValuesSealingDidNotWrite(t *testing.T) {
	s, aead := zeroKeySealer()
	sealedWith := func(eventType, members, values string) []byte {
		nonce := make([]byte, aead.NonceSize())
		ct := aead.Seal(nonce, nonce, []byte(values), additional(eventType, "user-7"))
		data := append([]byte(members), `"pii":`...)
		return append(appendEnvelope(data, "user-7", ct), '}')
	}
	for _, c := range []struct{ eventType, members, values string }{
		{"agent.created", `{"agent_id":3,"owner_id":7,"name":"[erased]","is_active":true,`, `{"name":"N","is_active":false,"agent_id":9}`},
		{"agent.created", `{"agent_id":3,"name":"[erased]",`, `{}`},
		{"session.turn_recorded", `{"session_id":1,"prompt_text":"[erased]","results":[{"response_text":"[erased]"}],`,
			`{"prompt_text":"Q","results[].response_text":["A"],"Results[].Response_Text":["B"]}`},
	} {
		sealed := sealedWith(c.eventType, c.members, c.values)
		want, got := decodeBothWays(t, s, c.eventType, sealed)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: OpenInto differs from Open (-open +into):\n%s", sealed, diff)
		}
	}
}

// What OpenInto opened does not stay in its scratch once released, however
// large an event came before.
func TestOpenIntoLeavesNoValueInItsScratch(t *testing.T) {
	s, _ := zeroKeySealer()
	ctx := context.Background()
	marker := strings.Repeat("MARKER-", 200)
	sc := new(openScratch)
	for i, data := range []string{
		`{"agent_id":3,"owner_id":7,"name":"` + marker + `","system_prompt":"` + marker + `","is_active":true}`,
		`{"agent_id":4,"owner_id":7,"name":"N","system_prompt":"P","is_active":true}`,
	} {
		sealed, err := s.Seal(ctx, "agent.created", json.RawMessage(data), 7)
		if err != nil {
			t.Fatal(err)
		}
		p := planFor("agent.created", reflect.TypeFor[events.AgentCreated]())
		var ev events.AgentCreated
		if p == nil {
			t.Fatal("no plan")
		}
		if taken, err := s.openIntoWith(ctx, sc, "agent.created", p, sealed, &ev); !taken || err != nil {
			t.Fatalf("openInto = %v, %v", taken, err)
		}
		if i == 0 && !strings.Contains(string(sc.body)+string(sc.sealed), "MARKER") {
			t.Fatal("the scratch never held the values: the test proves nothing")
		}
		sc.wipe()
	}
	for name, b := range map[string][]byte{"ciphertext": sc.sealed, "body": sc.body} {
		if strings.Contains(string(b[:cap(b)]), "MARKER") {
			t.Errorf("the %s scratch keeps an opened value past its release", name)
		}
	}
}

// Whatever text a user typed, OpenInto decodes it as Open does: in a turn
// and in a few-shot example.
func FuzzOpenIntoAgreesWithOpen(f *testing.F) {
	for _, seed := range [][2]string{
		{"plain", "text"}, {`"quoted" \ back`, "\u2028\u00e9"}, {"\xff\xfe invalid UTF-8", "\x00\x1f"}, {"", "<script>&amp;"},
	} {
		f.Add(seed[0], seed[1])
	}
	s, _ := zeroKeySealer()
	f.Fuzz(func(t *testing.T, prompt, answer string) {
		sealsWhole(t, s, "session.turn_recorded", events.SessionTurnRecorded{SessionID: 1, Turn: 1, PromptText: prompt,
			Messages: []events.ChatMessage{{Role: "user", Content: prompt}},
			Results:  []events.TurnResult{{ModelName: "echo", ResponseText: answer}, {ModelName: "echo", ResponseText: prompt}}})
		// A few-shot example: a nullable text and an object, top-level.
		meta, err := json.Marshal(map[string]string{prompt: answer})
		if err != nil {
			t.Fatal(err)
		}
		sealsWhole(t, s, "fewshot.created", events.FewShotCreated{ExampleID: 2, UserID: 7, Title: &prompt, InputText: answer,
			OutputText: prompt, Meta: meta, IsActive: true})
	})
}

// trailingEnvelope finds the "pii" member that sealing wrote, last, and
// nothing that only looks like it.
func TestTrailingEnvelope(t *testing.T) {
	s, _ := zeroKeySealer()
	for _, c := range intoCases {
		first, err := s.Seal(context.Background(), c.eventType, json.RawMessage(c.data), 7)
		if err != nil {
			t.Fatal(err)
		}
		sealed := trailingLayout(t, first) // as sealing wrote it before
		got, _, ok := trailingEnvelope(sealed)
		if want := topLevelPII(t, sealed); !ok || string(got) != string(want) {
			t.Errorf("%s: trailingEnvelope = %s, %v; want %s", sealed, got, ok, want)
		}
		// What OpenInto decodes: the event as stored, less that member.
		_, body, _ := envelopeOf(sealed)
		var want, stored map[string]json.RawMessage
		if err := json.Unmarshal(append(slices.Clone(body), '}'), &want); err != nil {
			t.Fatalf("%s: the event without its envelope, %s}: %v", sealed, body, err)
		}
		if err := json.Unmarshal(sealed, &stored); err != nil {
			t.Fatal(err)
		}
		delete(stored, "pii")
		if diff := cmp.Diff(stored, want); diff != "" {
			t.Errorf("%s: the event without its envelope differs (-stored +without):\n%s", sealed, diff)
		}
	}
	for _, data := range []string{
		`{"s":{"pii":{"sub":"user-7","ct":"AA=="}}}`,              // nested
		`{"s":[{"pii":{"sub":"user-7","ct":"AA=="}}]}`,            // in an array
		`{"pii":{"sub":"user-7","ct":"AA=="},"a":1}`,              // not last
		`{"a":1, "pii": {"sub":"user-7","ct":"AA=="}}`,            // spelled otherwise: the scan takes it
		`{"a":1,"pii":{"sub":"\u0075ser-7","ct":"AA=="}}`,         // an escape in the subject
		`{"a":1,"pii":{"sub":"user-7","ct":"AA=="}} `,             // space after
		`{"a":"x\",\"pii\":{\"sub\":\"user-7\",\"ct\":\"AA==\"}}`, // in a string
		`{"a":1,"xpii":{"sub":"user-7","ct":"AA=="}}`,
		`{"a":1,"pii":{"sub":"","ct":"AA=="}}`,
		`"pii":{"sub":"user-7","ct":"AA=="}}`,
	} {
		if got, _, ok := trailingEnvelope([]byte(data)); ok {
			t.Errorf("%s: trailingEnvelope = %s, want none", data, got)
		}
	}
}

// Whatever valid JSON ends as sealing writes the "pii" member, that member is
// the top level's, and what precedes it, closed, is the rest of the object.
func FuzzTrailingEnvelopeIsTheTopLevelMember(f *testing.F) {
	for _, seed := range []string{
		`{"a":1,"pii":{"sub":"user-7","ct":"AA=="}}`,
		`{"s":{"pii":{"sub":"user-7","ct":"AA=="}}}`,
		`{"a":"\"pii\":{\"sub\":\"user-7\",\"ct\":\"A\"}","pii":{"sub":"user-7","ct":"AA=="}}`,
		`{"a":[{"b":"}"}],"pii":{"sub":"partner-1","ct":""}}`,
		`{"pii":{"sub":"user-7","ct":"AA=="}}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data string) {
		got, at, ok := trailingEnvelope([]byte(data))
		if !ok || !json.Valid([]byte(data)) {
			return
		}
		if want := topLevelPII(t, []byte(data)); string(got) != string(want) {
			t.Errorf("%s: trailingEnvelope = %s, the top level's pii is %s", data, got, want)
		}
		if rest := data[:at] + `"pii":` + string(got) + "}"; rest != data {
			t.Errorf("%s: the member starts at %d: %s", data, at, rest)
		}
		_, body, _ := envelopeOf([]byte(data))
		if closed := string(body) + "}"; !json.Valid([]byte(closed)) {
			t.Errorf("%s: without its envelope, %s is not JSON", data, closed)
		}
	})
}

// leadingEnvelope finds the "pii" member that sealing wrote first, and
// nothing that only looks like it.
func TestLeadingEnvelope(t *testing.T) {
	s, _ := zeroKeySealer()
	for _, c := range intoCases {
		sealed, err := s.Seal(context.Background(), c.eventType, json.RawMessage(c.data), 7)
		if err != nil {
			t.Fatal(err)
		}
		checkLeadingEnvelope(t, sealed)
	}
	for _, data := range []string{
		`{"s":{"pii":{"sub":"user-7","ct":"AA=="}}}`,         // nested
		`{"a":1,"pii":{"sub":"user-7","ct":"AA=="}}`,         // not first
		`{ "pii":{"sub":"user-7","ct":"AA=="}}`,              // spelled otherwise: the scan takes it
		`{"pii":{"sub":"\u0075ser-7","ct":"AA=="}}`,          // an escape in the subject
		`{"pii":{"sub":"user-7","ct":"A\"A=="}}`,             // an escaped quote
		`{"pii":{"sub":"user-7","ct":"A\\"},"a":"=="}`,       // an escaped backslash
		"{\"pii\":{\"sub\":\"user-7\",\"ct\":\"AA\r\n==\"}}", // a raw CR LF
		`{"pii":{"sub":"user-7","ct":"AA=="} }`,              // space after
		`{"pii":{"sub":"user-7","ct":"AA==","x":1}}`,
		`{"pii":{"sub":"","ct":"AA=="}}`,
		`{"pii":{"sub":"user-7","ct":"AA=="}`,
	} {
		if sub, b64, _, ok := leadingEnvelope([]byte(data)); ok {
			t.Errorf("%s: leadingEnvelope = %s, %s; want none", data, sub, b64)
		}
	}
}

// checkLeadingEnvelope fails t unless leadingEnvelope reads data's
// top-level "pii" member, and the members after it are the rest of data.
func checkLeadingEnvelope(t *testing.T, data []byte) {
	t.Helper()
	sub, b64, after, ok := leadingEnvelope(data)
	if got, want := `{"sub":"`+string(sub)+`","ct":"`+string(b64)+`"}`, topLevelPII(t, data); !ok || got != string(want) {
		t.Errorf("%s: leadingEnvelope = %s, %v; want %s", data, got, ok, want)
	}
	var want, rest map[string]json.RawMessage
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	delete(want, "pii")
	if err := json.Unmarshal(append([]byte{'{'}, after...), &rest); err != nil {
		t.Fatalf("%s: the members after the envelope, {%s: %v", data, after, err)
	}
	if diff := cmp.Diff(want, rest); diff != "" {
		t.Errorf("%s: the members after the envelope differ (-stored +after):\n%s", data, diff)
	}
}

// Whatever valid JSON starts as sealing writes the "pii" member, that
// member is the top level's, and the rest is the object's other members.
func FuzzLeadingEnvelopeIsTheTopLevelMember(f *testing.F) {
	for _, seed := range []string{
		`{"pii":{"sub":"user-7","ct":"AA=="},"a":1}`,
		`{"pii":{"sub":"user-7","ct":"AA=="}}`,
		`{"pii":{"sub":"partner-1","ct":""},"a":"\"pii\":{\"sub\":\"user-7\",\"ct\":\"A\"}"}`,
		`{"pii":{"sub":"0","ct":"\xff"}}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data string) {
		if _, _, _, ok := leadingEnvelope([]byte(data)); !ok || !json.Valid([]byte(data)) || strings.Count(data, `"pii"`) > 1 {
			return // (a member twice: decoders take the last, this the first; sealing writes one)
		}
		checkLeadingEnvelope(t, []byte(data))
	})
}

// topLevelPII is the "pii" member of the JSON object data, by encoding/json.
func topLevelPII(t *testing.T, data []byte) json.RawMessage {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return top["pii"]
}

// lastQuote finds what bytes.LastIndexByte finds.
func FuzzLastQuote(f *testing.F) {
	for _, seed := range []string{"", `"`, `abc"def`, `"aaaaaaaaaaaaaaaaaaaaaaa`, `aaaaaaaaaaaaaaaa"aaaaaaaa`, "\xa2\"\x22aaaaaaaaaaa", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := lastQuote([]byte(s)), strings.LastIndexByte(s, '"'); got != want {
			t.Errorf("lastQuote(%q) = %d, want %d", s, got, want)
		}
	})
}

// fastBase64 decodes as encoding/base64 does: the same bytes from valid
// text, an error for text that is not (a character outside the alphabet,
// bad padding, a length that is not a multiple of four), at any length,
// within its vectorised blocks or after them.
func TestFastBase64DecodesAsTheStandardLibrary(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 300 {
		raw := make([]byte, n)
		for i := range raw {
			raw[i] = byte(rng.IntN(256))
		}
		text := []byte(base64.StdEncoding.EncodeToString(raw))
		variants := [][]byte{text}
		if len(text) > 0 {
			for _, c := range []byte{'*', '"', '=', 0x80, 'A'} {
				bad := slices.Clone(text)
				bad[rng.IntN(len(bad))] = c
				variants = append(variants, bad)
			}
			variants = append(variants, text[:len(text)-1])
		}
		for _, v := range variants {
			want := make([]byte, base64.StdEncoding.DecodedLen(len(v)))
			wn, werr := base64.StdEncoding.Decode(want, v)
			got := make([]byte, fastBase64.DecodedLen(len(v)))
			gn, gerr := fastBase64.Decode(got, v)
			if (werr == nil) != (gerr == nil) || werr == nil && !bytes.Equal(got[:gn], want[:wn]) {
				t.Fatalf("%q: fast %x, %v; standard %x, %v", v, got[:gn], gerr, want[:wn], werr)
			}
		}
		enc := make([]byte, fastBase64.EncodedLen(n))
		if fastBase64.Encode(enc, raw); !bytes.Equal(enc, text) {
			t.Fatalf("encoding %x: fast %s, standard %s", raw, enc, text)
		}
	}
}
