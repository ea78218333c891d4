package api_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Pinned tools from the npm registry.
const (
	redoclyCLI        = "@redocly/cli@2.77.0"
	openapiTypescript = "openapi-typescript@7.13.0"
	typescript        = "typescript@5.9.3"
)

// npx runs an npm package's command in dir, or skips the test where npm or
// its registry is out of reach.
func npx(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npx", append([]string{"-y"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Generated clients see everything the API answers: the document passes
// Redocly's recommended rules with no error, and a TypeScript client
// generated from it (openapi-typescript) type-checks a program that creates
// an agent and reads the X-Event-Position header.
func TestGeneratedClients(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("npx"); err != nil {
		t.Skip("no npx (Node.js): the generated-client test is skipped")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := exec.CommandContext(ctx, "npm", "view", openapiTypescript, "version").Run(); err != nil {
		t.Skipf("the npm registry is out of reach (%v): the generated-client test is skipped", err)
	}
	e := sharedEnv(t)
	dir := t.TempDir()
	doc := filepath.Join(dir, "openapi.json")
	if err := os.WriteFile(doc, e.doc.raw, 0o644); err != nil {
		t.Fatal(err)
	}

	out, err := npx(t, dir, redoclyCLI, "lint", doc, "--format=stylish")
	if err != nil || !strings.Contains(out, "valid") || strings.Contains(out, " error ") {
		t.Errorf("redocly lint: %v\n%s", err, out)
	}
	if out, err := npx(t, dir, openapiTypescript, doc, "-o", filepath.Join(dir, "lectern.d.ts")); err != nil {
		t.Fatalf("openapi-typescript: %v\n%s", err, out)
	}
	program, err := os.ReadFile(filepath.Join("testdata", "client_use.ts"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "use.ts"), program, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := npx(t, dir, "-p", typescript, "tsc", "--noEmit", "--strict", "--skipLibCheck", "--lib", "es2022,dom", "use.ts"); err != nil {
		t.Errorf("tsc of a program using the generated client: %v\n%s", err, out)
	}
}
