package main

import (
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lectern/personal"
	"lectern/pgtest"
)

// `lectern keys rotate` wraps every subject key under the new master key:
// afterwards the new key alone opens what was sealed before, the old one
// nothing; a second run finds nothing to do. Without a previous key, with
// the same key twice, or with a previous key file that is missing, it
// refuses, and makes no key file.
func TestKeysRotate(t *testing.T) {
	pool, url := pgtest.FreshURL(t)
	ctx := context.Background()
	runCLI(t, url, "users", "create", "--email", "ann@example.com", "--name", "Ann", "--password", "long enough")
	oldKey, newKey := strings.Repeat("ab", 32), strings.Repeat("cd", 32)
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
	missing := filepath.Join(dir, "old.key")
	for _, c := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"no previous key", map[string]string{"LECTERN_DATA_KEY": newKey}, "set LECTERN_DATA_KEY_PREVIOUS"},
		{"the same key", map[string]string{"LECTERN_DATA_KEY": newKey, "LECTERN_DATA_KEY_PREVIOUS": newKey}, "nothing to rotate"},
		{"a missing previous key file", map[string]string{"LECTERN_DATA_KEY": newKey, "LECTERN_DATA_KEY_PREVIOUS_FILE": missing}, "no key file"},
		{"a short previous key", map[string]string{"LECTERN_DATA_KEY": newKey, "LECTERN_DATA_KEY_PREVIOUS": "abcd"}, "LECTERN_DATA_KEY_PREVIOUS"},
	} {
		if _, err := cli(t, url, c.env, "keys", "rotate"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("the missing previous key file was made (%v)", err)
	}
	if !opensWith(oldKey) {
		t.Fatal("a refused rotation changed the keys")
	}

	rotate := map[string]string{"LECTERN_DATA_KEY": newKey, "LECTERN_DATA_KEY_PREVIOUS": oldKey}
	out, err := cli(t, url, rotate, "keys", "rotate")
	if err != nil || !strings.Contains(out, "rewrapped 1 subject keys") || !strings.Contains(out, "no subject key is left") {
		t.Fatalf("keys rotate: %q, %v", out, err)
	}
	if !opensWith(newKey) || opensWith(oldKey) {
		t.Error("after the rotation, the new key should open the sign-up and the old one not")
	}
	out, err = cli(t, url, rotate, "keys", "rotate")
	if err != nil || !strings.Contains(out, "rewrapped 0 subject keys under LECTERN_DATA_KEY; 1 were under it already") {
		t.Errorf("keys rotate again: %q, %v", out, err)
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
	rotating := map[string]string{"LECTERN_DATA_KEY": newKey, "LECTERN_DATA_KEY_PREVIOUS": strings.Repeat("ab", 32)}
	if _, err := cli(t, url, rotating, admin...); err != nil {
		t.Fatalf("with the new key and the previous one: %v", err)
	}
}
