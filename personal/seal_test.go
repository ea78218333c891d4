package personal_test

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"lectern/personal"
)

// memoryKeys is a KeySource in memory, for the sealing rules alone.
type memoryKeys struct {
	mu     sync.Mutex
	keys   map[string]cipher.AEAD
	erased map[string]bool
}

func newMemoryKeys() *memoryKeys {
	return &memoryKeys{keys: map[string]cipher.AEAD{}, erased: map[string]bool{}}
}

func (m *memoryKeys) Key(_ context.Context, subject string, create bool) (cipher.AEAD, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.erased[subject] {
		return nil, personal.ErrErased
	}
	if k, ok := m.keys[subject]; ok {
		return k, nil
	}
	if !create {
		return nil, personal.ErrErased
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	block, _ := aes.NewCipher(raw)
	k, _ := cipher.NewGCM(block)
	m.keys[subject] = k
	return k, nil
}

func (m *memoryKeys) erase(subject string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.keys, subject)
	m.erased[subject] = true
}

// sealCases are events of every type that holds personal data, each
// personal field holding the marker, with what they read as once erased.
var sealCases = []struct {
	eventType string
	actor     int64
	data      string
	erased    string
}{
	{"user.signed_up", 0, `{"user_id":7,"email":"MARKER-7f3a@example.com","name":"MARKER-7f3a","roles":["user"]}`,
		`{"email":"erased-user-7@erased.invalid","name":"[erased]","roles":["user"],"user_id":7}`},
	{"agent.created", 7, `{"agent_id":3,"owner_id":7,"name":"MARKER-7f3a","system_prompt":"MARKER-7f3a","role_description":"MARKER-7f3a","template_source":null,"is_active":true}`,
		`{"agent_id":3,"is_active":true,"name":"[erased]","owner_id":7,"role_description":null,"system_prompt":"[erased]","template_source":null}`},
	{"agent.updated", 7, `{"agent_id":3,"name":"MARKER-7f3a","system_prompt":"MARKER-7f3a","role_description":null,"template_source":"MARKER-7f3a","is_active":true,"changed":["name"]}`,
		`{"agent_id":3,"changed":["name"],"is_active":true,"name":"[erased]","role_description":null,"system_prompt":"[erased]","template_source":null}`},
	{"fewshot.created", 7, `{"example_id":2,"user_id":7,"title":"MARKER-7f3a","input_text":"MARKER-7f3a","output_text":"MARKER-7f3a","meta":{"note":"MARKER-7f3a"},"is_active":true}`,
		`{"example_id":2,"input_text":"[erased]","is_active":true,"meta":{},"output_text":"[erased]","title":null,"user_id":7}`},
	{"partner.created", 1, `{"partner_id":6,"org_id":1,"user_id":null,"full_name":"MARKER-7f3a","email":"MARKER-7f3a@example.com","phone":"MARKER-7f3a","role":"partner","is_active":true}`,
		`{"email":"erased-partner-6@erased.invalid","full_name":"[erased]","is_active":true,"org_id":1,"partner_id":6,"phone":null,"role":"partner","user_id":null}`},
	{"promotion.requested", 7, `{"request_id":8,"user_id":7,"name":"MARKER-7f3a","email":"MARKER-7f3a@example.com","org_name":"MARKER-7f3a","target_role":"partner","edu_category":"MARKER-7f3a"}`,
		`{"edu_category":null,"email":"erased-user-7@erased.invalid","name":"[erased]","org_name":"[erased]","request_id":8,"target_role":"partner","user_id":7}`},
	{"session.started", 7, `{"session_id":12,"user_id":7,"title":"MARKER-7f3a","settings":{"setting_id":1,"agent_snapshot":{"agent_id":3,"name":"MARKER-7f3a","system_prompt":"MARKER-7f3a"},"few_shot_links":[]}}`,
		`{"session_id":12,"settings":{"agent_snapshot":null,"few_shot_links":[],"setting_id":1},"title":null,"user_id":7}`},
	{"session.turn_recorded", 7, `{"session_id":12,"turn":1,"prompt_text":"MARKER-7f3a","messages":[{"role":"user","content":"MARKER-7f3a"}],"results":[{"model_name":"echo","response_text":"MARKER-7f3a"},{"model_name":"echo-reverse","response_text":"a3f7-REKRAM"}]}`,
		`{"messages":[],"prompt_text":"[erased]","results":[{"model_name":"echo","response_text":"[erased]"},{"model_name":"echo-reverse","response_text":"[erased]"}],"session_id":12,"turn":1}`},
	// A failed model's error: the provider's message may quote the prompt.
	{"session.turn_recorded", 7, `{"session_id":12,"turn":2,"prompt_text":"MARKER-7f3a","messages":[],"results":[{"model_name":"echo","response_text":"MARKER-7f3a","error":null},{"model_name":"gpt","response_text":"","error":{"kind":"upstream","message":"gpt answered 400 Bad Request: MARKER-7f3a"}}]}`,
		`{"messages":[],"prompt_text":"[erased]","results":[{"error":null,"model_name":"echo","response_text":"[erased]"},{"error":null,"model_name":"gpt","response_text":"[erased]"}],"session_id":12,"turn":2}`},
	// The text's hash would confirm a guess at the text.
	{"knowledge.document_uploaded", 0, `{"knowledge_id":4,"user_id":7,"title":"MARKER-7f3a","content_hash":"ab","content_size":3}`,
		`{"content_hash":"[erased]","content_size":3,"knowledge_id":4,"title":"[erased]","user_id":7}`},
}

func TestSealOpenErase(t *testing.T) {
	ctx := context.Background()
	for _, c := range sealCases {
		t.Run(c.eventType, func(t *testing.T) {
			keys := newMemoryKeys()
			s := personal.NewSealer(keys)
			sealed, err := s.Seal(ctx, c.eventType, json.RawMessage(c.data), c.actor)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(sealed), "MARKER") || strings.Contains(string(sealed), "REKRAM") {
				t.Errorf("sealed %s still holds the marker", sealed)
			}
			opened, err := s.Open(ctx, c.eventType, sealed)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(canonical(t, c.data), canonical(t, string(opened))); diff != "" {
				t.Errorf("opened (-want +got):\n%s", diff)
			}
			subject, err := personal.Subject(c.eventType, json.RawMessage(c.data), c.actor)
			if err != nil {
				t.Fatal(err)
			}
			// Sealed, the envelope names it, whoever acts; in clear, the
			// event's members and its actor do.
			if got := personal.SubjectOf(c.eventType, sealed, 0); got != subject || subject == "" {
				t.Errorf("SubjectOf(sealed) = %q, want %q", got, subject)
			}
			if got := personal.SubjectOf(c.eventType, []byte(c.data), c.actor); got != subject {
				t.Errorf("SubjectOf(clear) = %q, want %q", got, subject)
			}
			keys.erase(subject)
			erased, err := s.Open(ctx, c.eventType, sealed)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(canonical(t, c.erased), canonical(t, string(erased))); diff != "" {
				t.Errorf("erased (-want +got):\n%s", diff)
			}
		})
	}
}

// The "pii" member is read by hand as the sealer writes it; spelled any other
// valid way (re-indented by a tool, its members reordered), it opens all the
// same.
func TestEnvelopeOpensHoweverSpelled(t *testing.T) {
	ctx := context.Background()
	s := personal.NewSealer(newMemoryKeys())
	data := `{"agent_id":3,"owner_id":7,"name":"MARKER","system_prompt":"MARKER too","is_active":true}`
	sealed, err := s.Seal(ctx, "agent.created", json.RawMessage(data), 7)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(sealed, &top); err != nil {
		t.Fatal(err)
	}
	var env struct {
		Sub string `json:"sub"`
		CT  string `json:"ct"`
	}
	if err := json.Unmarshal(top["pii"], &env); err != nil {
		t.Fatal(err)
	}
	// A raw CR LF in a JSON string is not JSON (base64 alone would skip it).
	broken := strings.Replace(string(sealed), env.CT[:8], env.CT[:4]+"\r\n"+env.CT[4:8], 1)
	if _, err := s.Open(ctx, "agent.created", json.RawMessage(broken)); err == nil {
		t.Errorf("an envelope with a raw CR LF in its ciphertext (not JSON) opened: %q", broken)
	}
	for _, spelled := range []string{
		fmt.Sprintf(`{"ct":%q,"sub":%q}`, env.CT, env.Sub),
		fmt.Sprintf(`{ "sub" : %q , "ct" : %q }`, env.Sub, env.CT),
		fmt.Sprintf(`{"sub":"\u0075ser-7","ct":%q}`, env.CT),
	} {
		// By hand: json.Marshal would compact the spelling away.
		respelled := json.RawMessage(strings.Replace(string(sealed), string(top["pii"]), spelled, 1))
		opened, err := s.Open(ctx, "agent.created", respelled)
		if err != nil {
			t.Fatalf("%s: %v", spelled, err)
		}

		if diff := cmp.Diff(canonical(t, data), canonical(t, string(opened))); diff != "" {
			t.Errorf("%s opened (-want +got):\n%s", spelled, diff)
		}
	}
}

// Events that hold nothing personal, and events stored before sealing, are
// left as they are.
func TestUnsealedEventsPassThrough(t *testing.T) {
	ctx := context.Background()
	s := personal.NewSealer(newMemoryKeys())
	for _, c := range []struct{ eventType, data string }{
		{"class.created", `{"class_id":1,"name":"Algebra"}`},
		{"agent.created", `{"agent_id":3,"owner_id":7,"name":"plain, from before sealing"}`},
	} {
		got, err := s.Open(ctx, c.eventType, json.RawMessage(c.data))
		if err != nil || string(got) != c.data {
			t.Errorf("Open(%s) = %s, %v: want it unchanged", c.eventType, got, err)
		}
	}
	if sub := personal.SubjectOf("class.created", []byte(`{"class_id":1,"name":"Algebra"}`), 7); sub != "" {
		t.Errorf("SubjectOf(class.created) = %q: it holds nothing personal", sub)
	}
	got, err := s.Seal(ctx, "class.created", json.RawMessage(`{"class_id":1}`), 7)
	if err != nil || string(got) != `{"class_id":1}` {
		t.Errorf("Seal(class.created) = %s, %v: want it unchanged", got, err)
	}
}

// A sealed value is bound to its event type and subject: moved into another
// event, it does not open.
func TestSealedValuesAreBound(t *testing.T) {
	ctx := context.Background()
	s := personal.NewSealer(newMemoryKeys())
	sealed, err := s.Seal(ctx, "agent.created", json.RawMessage(`{"agent_id":3,"owner_id":7,"name":"n","system_prompt":"p"}`), 7)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open(ctx, "agent.updated", sealed); err == nil {
		t.Error("values sealed for agent.created opened as agent.updated")
	}
}

func canonical(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}
