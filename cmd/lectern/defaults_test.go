package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every command finds `make run`'s private cluster and signing key without
// DATABASE_URL or LECTERN_JWT_KEY; only serve demands a key.
func TestMakeRunDefaults(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("DATABASE_URL", "")
	t.Setenv("LECTERN_JWT_KEY", "")
	t.Setenv("LECTERN_JWT_KEY_FILE", "")

	if _, err := databaseURL(); err == nil || !strings.Contains(err.Error(), "make run") {
		t.Errorf("no cluster: %v, want the way to get one", err)
	}
	if _, err := readEnv(false); err == nil {
		t.Error("readEnv without a database succeeded")
	}

	if err := os.MkdirAll(filepath.Join(dir, ".data", "pg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".data", "pg", "PG_VERSION"), []byte("15\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	u, err := databaseURL()
	if want := "postgres:///lectern?host=" + strings.ReplaceAll(filepath.Join(dir, ".data", "pg"), "/", "%2F") + "&port=5433&sslmode=disable&user=postgres"; err != nil || u != want {
		t.Errorf("databaseURL = %q, %v; want %q", u, err, want)
	}
	e, err := readEnv(false) // users create: no key needed
	if err != nil || e.DatabaseURL != u || e.JWTKeyFile != "" {
		t.Errorf("readEnv(false) = %+v, %v", e, err)
	}
	if key, err := e.key(); err != nil || len(key) < 32 {
		t.Errorf("a throwaway key: %d bytes, %v", len(key), err)
	}
	if _, err := readEnv(true); err == nil || !strings.Contains(err.Error(), "LECTERN_JWT_KEY") {
		t.Errorf("serve without a key: %v", err)
	}

	keyFile := filepath.Join(dir, ".data", "jwt.key")
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if e, err := readEnv(true); err != nil || e.JWTKeyFile != keyFile {
		t.Errorf("readEnv(true) with make run's key = %+v, %v", e, err)
	}
	t.Setenv("DATABASE_URL", "postgres://elsewhere/db")
	if u, err := databaseURL(); err != nil || u != "postgres://elsewhere/db" {
		t.Errorf("DATABASE_URL set: %q, %v", u, err)
	}
}

// The container health check: exit 0 on a 200 from /readyz, an error else.
func TestHealthcheck(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }))
	defer srv.Close()
	run := func() error {
		cmd := healthcheckCmd()
		cmd.SetArgs([]string{"--url", srv.URL + "/readyz"})
		return cmd.Execute()
	}
	if err := run(); err != nil {
		t.Errorf("ready: %v", err)
	}
	status = http.StatusServiceUnavailable
	if err := run(); err == nil {
		t.Error("a 503 passed the health check")
	}
	srv.Close()
	if err := run(); err == nil {
		t.Error("no server passed the health check")
	}
}

// An export reports the lines it has written, however its writes are cut.
func TestLineCounter(t *testing.T) {
	var buf strings.Builder
	var seen []int64
	c := &lineCounter{w: &buf, lines: func(n int64) { seen = append(seen, n) }}
	for _, part := range []string{"{\"a\":1}\n{\"a\"", ":2}\n", "{\"a\":3}\n{\"a\":4}\n"} {
		if _, err := c.Write([]byte(part)); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(seen) != "[1 2 4]" || buf.Len() != 32 {
		t.Errorf("reported %v after %d bytes", seen, buf.Len())
	}
}
