package personal

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/pgtest"
)

// rotation is a database whose one subject key (user-1's, of sealed) an
// old master key wrapped, keys under the old key, and keys rotating to a
// new one.
type rotation struct {
	db                   *pgxpool.Pool
	oldMaster, newMaster []byte
	before, rotated      *Keys
	sealed               json.RawMessage
}

func newRotation(t *testing.T) *rotation {
	t.Helper()
	r := &rotation{db: pgtest.Fresh(t), oldMaster: make([]byte, 32), newMaster: make([]byte, 32)}
	_, _ = rand.Read(r.oldMaster)
	_, _ = rand.Read(r.newMaster)
	r.before, _ = NewKeys(r.db, r.oldMaster)
	var err error
	if r.sealed, err = NewSealer(r.before).Seal(context.Background(), "user.signed_up",
		json.RawMessage(`{"user_id":1,"email":"a@example.com","name":"A"}`), 0); err != nil {
		t.Fatal(err)
	}
	r.rotated, _ = NewRotatingKeys(r.db, r.newMaster, r.oldMaster)
	t.Cleanup(func() { rewrapRead = nil })
	return r
}

// A subject erased between Rewrap's read of its key and the write stays
// erased: the write replaces only what was read.
func TestRewrapDoesNotBringBackAKeyErasedMeanwhile(t *testing.T) {
	ctx := context.Background()
	r := newRotation(t)
	rewrapRead = func() {
		if err := r.before.Erase(ctx, "user-1"); err != nil {
			t.Error(err)
		}
	}
	rep, err := r.rotated.Rewrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Rewrapped != 0 || rep.Changed != 1 {
		t.Errorf("Rewrap wrote %d keys and found %d changed, want none and one", rep.Rewrapped, rep.Changed)
	}
	var wrapped []byte
	if err := r.db.QueryRow(ctx, `SELECT wrapped FROM subject_keys WHERE subject = 'user-1'`).Scan(&wrapped); err != nil || wrapped != nil {
		t.Errorf("the erased subject's key after Rewrap: %d bytes (%v), want none", len(wrapped), err)
	}
}

// Two runs at once: a key the other run rewrapped between this run's read
// and its write is counted as changed, not written again, and opens under
// the new master key.
func TestRewrapLeavesAKeyAnotherRunRewrapped(t *testing.T) {
	ctx := context.Background()
	r := newRotation(t)
	other, _ := NewRotatingKeys(r.db, r.newMaster, r.oldMaster)
	rewrapRead = func() {
		rewrapRead = nil // the other run goes straight through
		if rep, err := other.Rewrap(ctx); err != nil || rep.Rewrapped != 1 {
			t.Errorf("the other run: %+v, %v", rep, err)
		}
	}
	rep, err := r.rotated.Rewrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Rewrapped != 0 || rep.Changed != 1 {
		t.Errorf("Rewrap wrote %d keys and found %d changed, want none and one", rep.Rewrapped, rep.Changed)
	}
	after, _ := NewKeys(r.db, r.newMaster)
	if opened, err := NewSealer(after).Open(ctx, "user.signed_up", r.sealed); err != nil || !bytes.Contains(opened, []byte("a@example.com")) {
		t.Errorf("after both runs, with the new master key alone: %s, %v", opened, err)
	}
}

// RewrapAll passes until a pass finds nothing under the previous master
// key; a process that keeps making keys under it makes it give up.
func TestRewrapAllPassesUntilNothingIsLeft(t *testing.T) {
	ctx := context.Background()
	r := newRotation(t)
	var passes []RewrapReport
	n, last, err := r.rotated.RewrapAll(ctx, func(_ int, rep RewrapReport) { passes = append(passes, rep) })
	if err != nil || n != 1 || len(passes) != 2 || passes[1].Rewrapped != 0 || passes[1].Current != 1 || !reflect.DeepEqual(last, passes[1]) {
		t.Fatalf("RewrapAll: %d rewrapped, last %+v, %v, passes %+v; want 1, then a pass with nothing left, returned last",
			n, last, err, passes)
	}

	// A process on the old key alone makes a key before the next run and
	// one during each pass (after its read: the next pass finds it).
	made := 1
	oldKey := func() {
		made++
		if _, err := r.before.Key(ctx, fmt.Sprintf("user-%d", made), true); err != nil {
			t.Error(err)
		}
	}
	oldKey()
	rewrapRead = oldKey
	passes = nil
	n, _, err = r.rotated.RewrapAll(ctx, func(_ int, rep RewrapReport) { passes = append(passes, rep) })
	if !errors.Is(err, ErrKeysKeepComing) || len(passes) != MaxRewrapPasses || n != MaxRewrapPasses {
		t.Errorf("RewrapAll with keys coming under the old key: %d rewrapped in %d passes, %v; want %d in %d, ErrKeysKeepComing",
			n, len(passes), err, MaxRewrapPasses, MaxRewrapPasses)
	}
}
