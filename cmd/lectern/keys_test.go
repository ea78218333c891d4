package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lectern/personal"
	"lectern/pgtest"
)

// `lectern keys rotate` wraps every subject key under the new master key,
// then checks with a second pass: afterwards the new key alone opens what
// was sealed before, the old one nothing; a run after that finds nothing to
// do, and says the keys may be the wrong way round. Without a previous key,
// with the same key twice, or with either key file missing, it refuses,
// and makes no key file. A key neither master key opens fails it.
func TestKeysRotate(t *testing.T) {
	pool, url := pgtest.FreshURL(t)
	ctx := context.Background()
	runCLI(t, url, "users", "create", "--email", "ann@example.com", "--name", "Ann", "--password", "long enough")
	oldKey, newKey := cliDataKey, strings.Repeat("cd", 32)
	var sealed []byte
	if err := pool.QueryRow(ctx, `SELECT payload FROM events WHERE event_type = 'user.signed_up'`).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	opensWith := func(key string) bool {
		raw, _ := hex.DecodeString(key)
		keys, err := personal.NewKeys(pool, raw)
		if err != nil {
			t.Fatal(err)
		}
		opened, err := personal.NewSealer(keys).Open(ctx, "user.signed_up", sealed)
		return err == nil && strings.Contains(string(opened), "ann@example.com")
	}
	if !opensWith(oldKey) || opensWith(newKey) {
		t.Fatal("before the rotation, the old key should open the sign-up and the new one not")
	}

	dir := t.TempDir()
	missing, missingNew := filepath.Join(dir, "old.key"), filepath.Join(dir, "new.key")
	for _, c := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"no previous key", map[string]string{"LECTERN_DATA_KEY": newKey}, "set LECTERN_DATA_KEY_PREVIOUS"},
		{"the same key", map[string]string{"LECTERN_DATA_KEY": newKey, "LECTERN_DATA_KEY_PREVIOUS": newKey}, "nothing to rotate"},
		{"a missing previous key file", map[string]string{"LECTERN_DATA_KEY": newKey, "LECTERN_DATA_KEY_PREVIOUS_FILE": missing}, "no key file"},
		{"a short previous key", map[string]string{"LECTERN_DATA_KEY": newKey, "LECTERN_DATA_KEY_PREVIOUS": "abcd"}, "LECTERN_DATA_KEY_PREVIOUS"},
		{"a missing new key file", map[string]string{"LECTERN_DATA_KEY": "", "LECTERN_DATA_KEY_FILE": missingNew, "LECTERN_DATA_KEY_PREVIOUS": oldKey}, "no key file"},
	} {
		if _, err := cli(t, url, c.env, "keys", "rotate"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	for _, f := range []string{missing, missingNew} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("the missing key file %s was made (%v)", f, err)
		}
	}
	if !opensWith(oldKey) {
		t.Fatal("a refused rotation changed the keys")
	}

	rotate := map[string]string{"LECTERN_DATA_KEY": newKey, "LECTERN_DATA_KEY_PREVIOUS": oldKey}
	out, err := cli(t, url, rotate, "keys", "rotate")
	oldRaw, _ := hex.DecodeString(oldKey)
	newRaw, _ := hex.DecodeString(newKey)
	for _, want := range []string{
		"from the previous master key " + personal.KeyID(oldRaw) + " to " + personal.KeyID(newRaw),
		"pass 1: rewrapped 1 subject keys; 0 were under the new key already",
		"pass 2: rewrapped 0 subject keys; 1 were under the new key already",
		"a whole pass found no subject key under the previous master key",
	} {
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("keys rotate: %q, %v; want it to say %q", out, err, want)
		}
	}
	if !opensWith(newKey) || opensWith(oldKey) {
		t.Error("after the rotation, the new key should open the sign-up and the old one not")
	}
	out, err = cli(t, url, rotate, "keys", "rotate")
	if err != nil || !strings.Contains(out, "pass 1: rewrapped 0 subject keys; 1 were under the new key already") ||
		!strings.Contains(out, "the wrong way round") {
		t.Errorf("keys rotate again: %q, %v; want one pass, and the warning that the keys may be swapped", out, err)
	}

	// A key neither master key opens: reported, and the command fails.
	stranger, err := personal.NewKeys(pool, bytes.Repeat([]byte{0xef}, 32))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stranger.Key(ctx, "user-99", true); err != nil {
		t.Fatal(err)
	}
	out, err = cli(t, url, rotate, "keys", "rotate")
	if err == nil || !strings.Contains(err.Error(), "1 subject keys open under neither master key") || !strings.Contains(err.Error(), "user-") {
		t.Errorf("keys rotate with a key neither opens: %q, %v", out, err)
	}
}

// `lectern keys new` writes a new key file, readable by its owner alone,
// and never over an existing one.
func TestKeysNew(t *testing.T) {
	_, url := pgtest.FreshURL(t)
	path := filepath.Join(t.TempDir(), "keys", "data.key")
	out, err := cli(t, url, nil, "keys", "new", path)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil || len(key) != 32 || !strings.Contains(out, personal.KeyID(key)) {
		t.Fatalf("the new key file holds %q (%v); the command said %q", raw, err, out)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the key file's mode: %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	if _, err := cli(t, url, nil, "keys", "new", path); err == nil {
		t.Error("a second keys new over the same file was accepted")
	}
	if again, _ := os.ReadFile(path); string(again) != string(raw) {
		t.Error("the existing key file was overwritten")
	}
}

// A command given the new key and the previous one works on what the old
// key sealed: granting the admin role loads the user's stream, whose
// sign-up only the previous key's subject key opens. With the new key
// alone it cannot.
func TestCommandsReadWithThePreviousKey(t *testing.T) {
	_, url := pgtest.FreshURL(t)
	runCLI(t, url, "users", "create", "--email", "ann@example.com", "--name", "Ann", "--password", "long enough")
	newKey := strings.Repeat("cd", 32)
	admin := []string{"users", "create", "--email", "ann@example.com", "--name", "Ann", "--password", "long enough", "--admin"}
	if _, err := cli(t, url, map[string]string{"LECTERN_DATA_KEY": newKey}, admin...); err == nil {
		t.Fatal("with the new key alone, the user's stream was read")
	}
	rotating := map[string]string{"LECTERN_DATA_KEY": newKey, "LECTERN_DATA_KEY_PREVIOUS": cliDataKey}
	if _, err := cli(t, url, rotating, admin...); err != nil {
		t.Fatalf("with the new key and the previous one: %v", err)
	}
}
