package auth

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestLoadOrCreateKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "keys")
	path := filepath.Join(dir, "jwt.key")

	key, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(key) < MinKeyLen {
		t.Fatalf("created key is %d bytes", len(key))
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("key file mode = %o, want 600", perm)
	}
	di, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := di.Mode().Perm(); perm&0o077 != 0 {
		t.Errorf("key directory mode = %o, want no group/other access", perm)
	}
	content, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(content)); got != hex.EncodeToString(key) {
		t.Errorf("file holds %q, want hex of the key", got)
	}
	// No temporary files left behind.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("key directory holds %d entries, want just the key", len(entries))
	}

	again, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, key) {
		t.Error("second call returned a different key")
	}
	if _, err := NewTokens(key, nil); err != nil {
		t.Errorf("created key is not accepted by NewTokens: %v", err)
	}
}

func TestLoadOrCreateKeyConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jwt.key")
	const n = 8
	keys := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { keys[i], errs[i] = LoadOrCreateKey(path) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if !bytes.Equal(keys[i], keys[0]) {
			t.Fatalf("call %d got a different key", i)
		}
	}
}

func TestLoadOrCreateKeyRejectsBadFile(t *testing.T) {
	for name, content := range map[string]string{
		"empty":   "",
		"not hex": strings.Repeat("zz", 32),
		"short":   strings.Repeat("ab", 31),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "jwt.key")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := LoadOrCreateKey(path); err == nil {
				t.Error("LoadOrCreateKey accepted a bad key file")
			}
			after, _ := os.ReadFile(path)
			if string(after) != content {
				t.Error("bad key file was overwritten")
			}
		})
	}
}

func TestDecodeKey(t *testing.T) {
	long := strings.Repeat("0f", 40)
	key, err := DecodeKey("  " + long + "\n")
	if err != nil || len(key) != 40 {
		t.Errorf("DecodeKey(80 hex digits) = %d bytes, %v", len(key), err)
	}
	if _, err := DecodeKey(strings.Repeat("0f", 31)); err == nil {
		t.Error("DecodeKey accepted 31 bytes")
	}
}
