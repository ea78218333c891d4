package personal

import (
	"context"
	"crypto/cipher"
	"strings"
	"testing"
)

// stableKeys is a key source in memory: one key per subject, erasable.
type stableKeys struct {
	keys   map[string]cipher.AEAD
	erased map[string]bool
}

func (k stableKeys) Key(ctx context.Context, subject string, create bool) (cipher.AEAD, error) {
	if k.erased[subject] {
		return nil, ErrErased
	}
	if aead, ok := k.keys[subject]; ok {
		return aead, nil
	}
	if !create {
		return nil, ErrErased
	}
	aead, err := forgotten{}.Key(ctx, subject, true)
	k.keys[subject] = aead
	return aead, err
}

const startedWithStyle = `{"session_id":1,"user_id":7,"class_id":null,"project_id":null,"agent_id":null,"knowledge_ids":[],` +
	`"title":"Title MARK","settings":{"setting_id":1,"style_preset":"accurate","style_params":{"persona":"Persona MARK"},` +
	`"generation_params":{},"agent_snapshot":null,"few_shot_links":[]}}`

// An event sealed before one of its fields joined the table (a session's
// style parameters, in clear beside its sealed title) is sealed whole
// again: nothing personal stays in clear, and it opens as before. Sealed
// events with nothing in clear, and events with nothing personal, are left
// alone; an erased subject's values read as placeholders.
func TestSealStoredSealsAFieldThatJoinedLater(t *testing.T) {
	ctx := context.Background()
	keys := stableKeys{keys: map[string]cipher.AEAD{}, erased: map[string]bool{}}
	s := NewSealer(keys)
	current := rules["session.started"]
	rules["session.started"] = rule{subjects: current.subjects, fields: parseFields("title:n", "settings.agent_snapshot:n")}
	sealedBefore, err := s.Seal(ctx, "session.started", []byte(startedWithStyle), 7)
	rules["session.started"] = current
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(sealedBefore), "Persona MARK") || strings.Contains(string(sealedBefore), "Title MARK") {
		t.Fatalf("the event as sealed before: %s", sealedBefore)
	}

	resealed, changed, err := s.SealStored(ctx, "session.started", sealedBefore, 7)
	if err != nil || !changed || strings.Contains(string(resealed), "MARK") {
		t.Fatalf("SealStored: changed %v, %v: %s; want it sealed whole", changed, err, resealed)
	}
	opened, err := s.Open(ctx, "session.started", resealed)
	if err != nil || !sameInClear(opened, []byte(startedWithStyle)) {
		t.Errorf("it opens as %s (%v), want %s", opened, err, startedWithStyle)
	}
	for name, data := range map[string][]byte{"sealed whole": resealed, "nothing personal": []byte(`{"class_id":1}`)} {
		typ := map[string]string{"sealed whole": "session.started", "nothing personal": "class.created"}[name]
		if out, changed, err := s.SealStored(ctx, typ, data, 7); err != nil || changed || string(out) != string(data) {
			t.Errorf("%s: changed %v (%v), want it left alone", name, changed, err)
		}
	}

	keys.erased[UserSubject(7)] = true
	erased, changed, err := s.SealStored(ctx, "session.started", sealedBefore, 7)
	if err != nil || !changed || strings.Contains(string(erased), "MARK") {
		t.Fatalf("an erased subject's: changed %v, %v: %s", changed, err, erased)
	}
	if opened, err := s.Open(ctx, "session.started", erased); err != nil || strings.Contains(string(opened), "MARK") {
		t.Errorf("an erased subject's opens as %s (%v), want placeholders", opened, err)
	}
}
