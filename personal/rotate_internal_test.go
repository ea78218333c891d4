package personal

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"testing"

	"lectern/pgtest"
)

// A subject erased between Rewrap's read of its key and the write stays
// erased: the write replaces only what was read.
func TestRewrapDoesNotBringBackAKeyErasedMeanwhile(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	oldMaster, newMaster := make([]byte, 32), make([]byte, 32)
	_, _ = rand.Read(oldMaster)
	_, _ = rand.Read(newMaster)
	before, _ := NewKeys(db, oldMaster)
	if _, err := NewSealer(before).Seal(ctx, "user.signed_up", json.RawMessage(`{"user_id":1,"email":"a@example.com","name":"A"}`), 0); err != nil {
		t.Fatal(err)
	}
	rotating, _ := NewRotatingKeys(db, newMaster, oldMaster)
	rewrapRead = func() {
		if err := before.Erase(ctx, "user-1"); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { rewrapRead = nil })
	rep, err := rotating.Rewrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Rewrapped != 0 || rep.Changed != 1 {
		t.Errorf("Rewrap wrote %d keys and found %d changed, want none and one", rep.Rewrapped, rep.Changed)
	}
	var wrapped []byte
	if err := db.QueryRow(ctx, `SELECT wrapped FROM subject_keys WHERE subject = 'user-1'`).Scan(&wrapped); err != nil || wrapped != nil {
		t.Errorf("the erased subject's key after Rewrap: %d bytes (%v), want none", len(wrapped), err)
	}
}

// Two runs at once: a key the other run rewrapped between this run's read
// and its write is counted as changed, not written again, and opens under
// the new master key.
func TestRewrapLeavesAKeyAnotherRunRewrapped(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	oldMaster, newMaster := make([]byte, 32), make([]byte, 32)
	_, _ = rand.Read(oldMaster)
	_, _ = rand.Read(newMaster)
	before, _ := NewKeys(db, oldMaster)
	sealed, err := NewSealer(before).Seal(ctx, "user.signed_up", json.RawMessage(`{"user_id":1,"email":"a@example.com","name":"A"}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	rotating, _ := NewRotatingKeys(db, newMaster, oldMaster)
	other, _ := NewRotatingKeys(db, newMaster, oldMaster)
	rewrapRead = func() {
		rewrapRead = nil // the other run goes straight through
		if rep, err := other.Rewrap(ctx); err != nil || rep.Rewrapped != 1 {
			t.Errorf("the other run: %+v, %v", rep, err)
		}
	}
	t.Cleanup(func() { rewrapRead = nil })
	rep, err := rotating.Rewrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Rewrapped != 0 || rep.Changed != 1 {
		t.Errorf("Rewrap wrote %d keys and found %d changed, want none and one", rep.Rewrapped, rep.Changed)
	}
	after, _ := NewKeys(db, newMaster)
	if opened, err := NewSealer(after).Open(ctx, "user.signed_up", sealed); err != nil || !bytes.Contains(opened, []byte("a@example.com")) {
		t.Errorf("after both runs, with the new master key alone: %s, %v", opened, err)
	}
}
