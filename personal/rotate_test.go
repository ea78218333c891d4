package personal_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"lectern/personal"
	"lectern/pgtest"
)

// sealFor seals a user.signed_up of user id with keys.
func sealFor(t *testing.T, keys personal.KeySource, id int) json.RawMessage {
	t.Helper()
	data, err := personal.NewSealer(keys).Seal(context.Background(), "user.signed_up",
		json.RawMessage(fmt.Sprintf(`{"user_id":%d,"email":"u%d@example.com","name":"U"}`, id, id)), 0)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// opens reports whether keys open sealed (of user id) to its e-mail; an
// error is returned as it is.
func opens(keys personal.KeySource, id int, sealed json.RawMessage) (bool, error) {
	opened, err := personal.NewSealer(keys).Open(context.Background(), "user.signed_up", sealed)
	return err == nil && strings.Contains(string(opened), fmt.Sprintf("u%d@example.com", id)), err
}

// Rotating the master key: replicas given the new key and the previous one
// read keys wrapped by either and make new ones under the new key; Rewrap
// moves the rest under it; then the new key alone opens every event, the
// old one none, and erased subjects stay erased.
func TestRotatingTheMasterKey(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	oldMaster, newMaster := masterKey(t), masterKey(t)
	before, _ := personal.NewKeys(db, oldMaster)
	sealed := map[int]json.RawMessage{}
	for id := 1; id <= 3; id++ {
		sealed[id] = sealFor(t, before, id)
	}
	if err := before.Erase(ctx, "user-3"); err != nil {
		t.Fatal(err)
	}

	rotating, err := personal.NewRotatingKeys(db, newMaster, oldMaster)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := opens(rotating, 1, sealed[1]); !ok {
		t.Fatalf("during the rotation, a key wrapped by the previous master key: %v", err)
	}
	sealed[4] = sealFor(t, rotating, 4) // a new subject: its key is made under the new master key
	newOnly, _ := personal.NewKeys(db, newMaster)
	if ok, err := opens(newOnly, 4, sealed[4]); !ok {
		t.Fatalf("a key made during the rotation is not under the new master key: %v", err)
	}
	if _, err := opens(newOnly, 2, sealed[2]); err == nil || !strings.Contains(err.Error(), "LECTERN_DATA_KEY") {
		t.Fatalf("before Rewrap, the new master key alone: %v, want an error naming LECTERN_DATA_KEY", err)
	}

	rep, err := rotating.Rewrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(personal.RewrapReport{Rewrapped: 2, Current: 1, Erased: 1}, rep); diff != "" {
		t.Errorf("Rewrap (-want +got):\n%s", diff)
	}
	after, _ := personal.NewKeys(db, newMaster) // nothing cached
	oldOnly, _ := personal.NewKeys(db, oldMaster)
	for _, id := range []int{1, 2, 4} {
		if ok, err := opens(after, id, sealed[id]); !ok {
			t.Errorf("user-%d after Rewrap, with the new master key: %v", id, err)
		}
		if _, err := opens(oldOnly, id, sealed[id]); err == nil {
			t.Errorf("user-%d after Rewrap: the old master key still opens it", id)
		}
	}
	if ok, err := opens(after, 3, sealed[3]); ok || err != nil {
		t.Errorf("the erased user-3 after Rewrap: opened %v, %v; want its placeholders", ok, err)
	}

	again, err := rotating.Rewrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(personal.RewrapReport{Current: 3, Erased: 1}, again); diff != "" {
		t.Errorf("Rewrap again (-want +got):\n%s", diff)
	}
	if _, err := newOnly.Rewrap(ctx); !errors.Is(err, personal.ErrNoPreviousKey) {
		t.Errorf("Rewrap without a previous key: %v, want ErrNoPreviousKey", err)
	}
	if _, err := personal.NewRotatingKeys(db, newMaster, oldMaster[:16]); err == nil {
		t.Error("a 16-byte previous master key was accepted")
	}
}

// A key that neither master key opens is reported, by subject, and left as
// it is: a wrong LECTERN_DATA_KEY_PREVIOUS destroys nothing.
func TestRewrapLeavesWhatItCannotOpen(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	stranger, _ := personal.NewKeys(db, masterKey(t))
	sealFor(t, stranger, 1)
	var stored []byte
	if err := db.QueryRow(ctx, `SELECT wrapped FROM subject_keys WHERE subject = 'user-1'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	rotating, _ := personal.NewRotatingKeys(db, masterKey(t), masterKey(t))
	rep, err := rotating.Rewrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(personal.RewrapReport{Unreadable: []string{"user-1"}, UnreadableCount: 1}, rep); diff != "" {
		t.Errorf("Rewrap (-want +got):\n%s", diff)
	}
	var now []byte
	if err := db.QueryRow(ctx, `SELECT wrapped FROM subject_keys WHERE subject = 'user-1'`).Scan(&now); err != nil || string(now) != string(stored) {
		t.Errorf("the unreadable key was changed (%v)", err)
	}
}

// Keys in every batch are rewrapped: the first, the middle of the second,
// and the last row of a table that is exactly two batches long.
func TestRewrapGoesThroughEveryBatch(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Fresh(t)
	oldMaster, newMaster := masterKey(t), masterKey(t)
	// Tombstones user-10001 to user-11998 but user-11500: with user-1,
	// user-11500 and user-3, 2 000 rows, the three keys at rows 1, 1 501
	// and 2 000 in subject order.
	if _, err := db.Exec(ctx, `INSERT INTO subject_keys (subject, wrapped, erased_at)
		SELECT 'user-' || i, NULL, now() FROM generate_series(10001, 11998) i WHERE i <> 11500`); err != nil {
		t.Fatal(err)
	}
	before, _ := personal.NewKeys(db, oldMaster)
	sealed := map[int]json.RawMessage{}
	for _, id := range []int{1, 11500, 3} {
		sealed[id] = sealFor(t, before, id)
	}
	rotating, _ := personal.NewRotatingKeys(db, newMaster, oldMaster)
	rep, err := rotating.Rewrap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(personal.RewrapReport{Rewrapped: 3, Erased: 1997}, rep); diff != "" {
		t.Errorf("Rewrap (-want +got):\n%s", diff)
	}
	after, _ := personal.NewKeys(db, newMaster)
	for id, data := range sealed {
		if ok, err := opens(after, id, data); !ok {
			t.Errorf("user-%d after Rewrap, with the new master key alone: %v", id, err)
		}
	}
}

// KeyID tells master keys apart and says nothing of them.
func TestKeyID(t *testing.T) {
	a, b := masterKey(t), masterKey(t)
	if personal.KeyID(a) != personal.KeyID(bytes.Clone(a)) || personal.KeyID(a) == personal.KeyID(b) {
		t.Error("KeyID is not one id per key")
	}
	if id := personal.KeyID(a); len(id) != 16 || strings.Contains(fmt.Sprintf("%x", a), id) {
		t.Errorf("KeyID %q: want 16 hex characters that are not the key's", id)
	}
}
