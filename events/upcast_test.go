package events_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"lectern/events"
)

// noteV3 is a test event at schema version 3: v1 was {"text"}, v2 renamed
// it to {"body"}, v3 added {"lang"} with "en" for older notes.
type noteV3 struct {
	Body string `json:"body"`
	Lang string `json:"lang"`
}

func (noteV3) EventType() string  { return "test.note" }
func (noteV3) SchemaVersion() int { return 3 }

func rename(from, to string) events.Upcaster {
	return func(data json.RawMessage) (json.RawMessage, error) {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, err
		}
		m[to] = m[from]
		delete(m, from)
		return json.Marshal(m)
	}
}

func addLang(data json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	m["lang"] = json.RawMessage(`"en"`)
	return json.Marshal(m)
}

func noteRegistry(steps int) *events.Registry {
	r := events.NewRegistry()
	events.Register[noteV3](r)
	if steps >= 1 {
		r.RegisterUpcaster("test.note", 1, rename("text", "body"))
	}
	if steps >= 2 {
		r.RegisterUpcaster("test.note", 2, addLang)
	}
	return r
}

func TestDecodeUpcastsOldPayloads(t *testing.T) {
	t.Parallel()
	r := noteRegistry(2)
	for _, tc := range []struct {
		name    string
		version int
		data    string
		want    noteV3
	}{
		{"v1 through both steps", 1, `{"text":"hi"}`, noteV3{Body: "hi", Lang: "en"}},
		{"an unset version reads as v1", 0, `{"text":"hi"}`, noteV3{Body: "hi", Lang: "en"}},
		{"v2 through the last step", 2, `{"body":"hi"}`, noteV3{Body: "hi", Lang: "en"}},
		{"v3 as stored", 3, `{"body":"hi","lang":"fr"}`, noteV3{Body: "hi", Lang: "fr"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := r.Decode("test.note", tc.version, json.RawMessage(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, e); diff != "" {
				t.Errorf("Decode (-want +got):\n%s", diff)
			}
			var into noteV3
			if err := r.DecodeInto("test.note", tc.version, json.RawMessage(tc.data), &into); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, into); diff != "" {
				t.Errorf("DecodeInto (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeRefusesShapesItCannotReach(t *testing.T) {
	t.Parallel()
	failing := events.NewRegistry()
	events.Register[noteV3](failing)
	failing.RegisterUpcaster("test.note", 1, func(json.RawMessage) (json.RawMessage, error) {
		return nil, json.Unmarshal([]byte("{"), new(any))
	})
	for _, tc := range []struct {
		name    string
		r       *events.Registry
		version int
		want    string
	}{
		{"a missing step", noteRegistry(1), 1, "reached schema version 2, but the type is at version 3"},
		{"no steps", noteRegistry(0), 1, "reached schema version 1, but the type is at version 3"},
		{"a newer release's payload", noteRegistry(2), 4, "reached schema version 4, but the type is at version 3"},
		{"a failing step", failing, 1, "upcast test.note from version 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.r.Decode("test.note", tc.version, json.RawMessage(`{"text":"hi"}`))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Decode error %v, want one containing %q", err, tc.want)
			}
			err = tc.r.DecodeInto("test.note", tc.version, json.RawMessage(`{"text":"hi"}`), new(noteV3))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("DecodeInto error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestEveryRegisteredEventStillDecodesAtVersionOne(t *testing.T) {
	t.Parallel()
	// Every type began at version 1: the version check must not refuse
	// history already stored.
	e, err := events.NewRegistry().Decode("agent.created", 1, json.RawMessage(`{"agent_id":3,"name":"Tutor"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := e.(events.AgentCreated); got.AgentID != 3 || got.Name != "Tutor" {
		t.Errorf("decoded %+v", got)
	}
}

func TestDuplicateUpcasterPanics(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("a second upcaster for test.note from version 1 did not panic")
		}
	}()
	noteRegistry(1).RegisterUpcaster("test.note", 1, addLang)
}

// A sign-up stored at version 1 held the password hash; read today it has
// none (the credentials table holds it).
func TestSignedUpVersionOneLosesItsPasswordHash(t *testing.T) {
	e, err := events.NewRegistry().Decode("user.signed_up", 1,
		json.RawMessage(`{"user_id":7,"email":"a@example.com","name":"A","password_hash":"$argon2id$secret","roles":["user"]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := events.UserSignedUp{UserID: 7, Email: "a@example.com", Name: "A", Roles: []string{"user"}}
	if diff := cmp.Diff(want, e); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
	if raw, _ := json.Marshal(e); strings.Contains(string(raw), "password") {
		t.Errorf("re-encoded %s", raw)
	}
}

// A document uploaded before blobs kept its text in its event: upcasting
// keeps the text and gives it the address a blob of it would have.
func TestDocumentUploadedVersionOneKeepsItsTextWithItsAddress(t *testing.T) {
	e, err := events.NewRegistry().Decode("knowledge.document_uploaded", 1,
		json.RawMessage(`{"knowledge_id":4,"user_id":7,"title":"Cells","content_type":"text/plain","size":12,"content":"Cells divide",`+
			`"settings":{"top_k":5,"min_score":"0.0","score_type":"cosine_similarity","reranker_enabled":false,"reranker_model":null,"reranker_top_n":3}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := events.KnowledgeDocumentUploaded{KnowledgeID: 4, UserID: 7, Title: "Cells", ContentType: "text/plain", Size: 12,
		ContentSize: 12, Content: "Cells divide",
		Settings: events.KnowledgeSearchSettings{TopK: 5, MinScore: "0.0", ScoreType: "cosine_similarity", RerankerTopN: 3}}
	sum := sha256.Sum256([]byte("Cells divide"))
	want.ContentHash = hex.EncodeToString(sum[:])
	if diff := cmp.Diff(want, e); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
}

// A version 1 turn reads as version 2 unchanged (its messages whole,
// history_turns 0): a reader that decodes straight into the event
// (OpenIntoWith, a replay's) takes it, as it takes a version 2 turn; a
// step that changes the payload is never skipped.
func TestSameShapeStepsLetTheOpenerDecode(t *testing.T) {
	opened := 0
	r := events.NewRegistry().OpenIntoWith(func(eventType string, data json.RawMessage, v any) (bool, error) {
		opened++
		return true, json.Unmarshal(data, v)
	})
	var turn events.SessionTurnRecorded
	v1 := `{"session_id":3,"turn":2,"prompt_text":"p","messages":[{"role":"user","content":"a"},{"role":"user","content":"p"}],"params":{},"results":[]}`
	if err := r.DecodeInto("session.turn_recorded", 1, json.RawMessage(v1), &turn); err != nil {
		t.Fatal(err)
	}
	if opened != 1 || turn.HistoryTurns != 0 || len(turn.Messages) != 2 {
		t.Errorf("opened %d times: %+v", opened, turn)
	}
	var doc events.KnowledgeDocumentUploaded
	if err := r.DecodeInto("knowledge.document_uploaded", 1, json.RawMessage(`{"knowledge_id":1,"user_id":2,"title":"t","content":"abc"}`), &doc); err != nil {
		t.Fatal(err)
	}
	if opened != 1 || doc.ContentHash == "" {
		t.Errorf("version 1 of a document went past its upcaster (opened %d times): %+v", opened, doc)
	}
}
