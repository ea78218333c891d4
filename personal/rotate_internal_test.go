package personal

import (
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
