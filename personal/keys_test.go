package personal_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"lectern/eventstore"
	"lectern/personal"
	"lectern/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Cleanup()
	os.Exit(code)
}

func masterKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

// Keys live in PostgreSQL, wrapped: another process with the same master
// key opens what this one sealed; one with another master key cannot; an
// erased subject gets no key again.
func TestKeysInPostgreSQL(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t) // user-41 is erased below, for good
	master := masterKey(t)
	a, err := personal.NewKeys(db, master)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := personal.NewSealer(a).Seal(ctx, "user.signed_up", json.RawMessage(`{"user_id":41,"email":"ann@example.com","name":"Ann"}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	var wrapped []byte
	if err := db.QueryRow(ctx, `SELECT wrapped FROM subject_keys WHERE subject = 'user-41'`).Scan(&wrapped); err != nil || len(wrapped) != 12+32+16 {
		t.Fatalf("the stored key: %d bytes (%v), want a wrapped 32-byte key", len(wrapped), err)
	}

	b, _ := personal.NewKeys(db, master) // another replica
	opened, err := personal.NewSealer(b).Open(ctx, "user.signed_up", sealed)
	if err != nil || !strings.Contains(string(opened), "ann@example.com") {
		t.Fatalf("another replica opened %s, %v", opened, err)
	}
	other, _ := personal.NewKeys(db, masterKey(t))
	if _, err := personal.NewSealer(other).Open(ctx, "user.signed_up", sealed); err == nil || !strings.Contains(err.Error(), "LECTERN_DATA_KEY") {
		t.Errorf("a wrong master key: %v, want an error naming LECTERN_DATA_KEY", err)
	}

	if err := a.Erase(ctx, "user-41"); err != nil {
		t.Fatal(err)
	}
	fresh, _ := personal.NewKeys(db, master) // no cache
	opened, err = personal.NewSealer(fresh).Open(ctx, "user.signed_up", sealed)
	if err != nil || strings.Contains(string(opened), "ann@") || !strings.Contains(string(opened), "erased-user-41@erased.invalid") {
		t.Errorf("after erasure: %s, %v: want the placeholders", opened, err)
	}
	if _, err := fresh.Key(ctx, "user-41", true); !errors.Is(err, personal.ErrErased) {
		t.Errorf("a key for an erased subject: %v, want ErrErased", err)
	}
	if _, err := personal.NewKeys(db, master[:16]); err == nil {
		t.Error("a 16-byte master key was accepted")
	}
}

// A page of events needs its keys in one statement: after Prefetch, opening
// the page asks the database nothing (its pool is closed), erased subjects
// included.
func TestPrefetchLoadsAPageOfKeys(t *testing.T) {
	ctx := context.Background()
	db, _, err := pgtest.NewDatabase(ctx, pgtest.URL(t)) // closed below
	if err != nil {
		t.Fatal(err)
	}
	master := masterKey(t)
	writer, _ := personal.NewKeys(db, master)
	sealer := personal.NewSealer(writer)
	var page []eventstore.RecordedEvent
	for id := int64(1); id <= 5; id++ {
		data, err := sealer.Seal(ctx, "user.signed_up", json.RawMessage(fmt.Sprintf(`{"user_id":%d,"email":"u%d@example.com","name":"U"}`, id, id)), 0)
		if err != nil {
			t.Fatal(err)
		}
		page = append(page, eventstore.RecordedEvent{Type: "user.signed_up", Data: data})
	}
	page = append(page, eventstore.RecordedEvent{Type: "class.created", Data: json.RawMessage(`{"class_id":1}`)})
	if err := writer.Erase(ctx, "user-3"); err != nil {
		t.Fatal(err)
	}

	reader, _ := personal.NewKeys(db, master) // another process: nothing cached
	if err := personal.NewSealer(reader).Prefetch(ctx, page); err != nil {
		t.Fatal(err)
	}
	db.Close()
	opener := personal.NewSealer(reader)
	for i, ev := range page[:5] {
		opened, err := opener.Open(ctx, ev.Type, ev.Data)
		if err != nil {
			t.Fatalf("event %d after Prefetch, with the database closed: %v", i+1, err)
		}
		want := fmt.Sprintf("u%d@example.com", i+1)
		if i+1 == 3 {
			want = "erased-user-3@erased.invalid"
		}
		if !strings.Contains(string(opened), want) {
			t.Errorf("event %d opened to %s, want %s in it", i+1, opened, want)
		}
	}
}
