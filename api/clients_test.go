package api_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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

// redoclyValid is the summary Redocly prints when it found no error.
const redoclyValid = "Your API description is valid."

// redoclyProblem is one finding of redocly lint --format=stylish:
// "  1954:3  warning  info-license  Info object should contain ...".
var redoclyProblem = regexp.MustCompile(`(?m)^\s+\d+:\d+\s+(error|warning)\s+(\S+)\s+(.*)$`)

// acceptedWarnings are the recommended rules the document breaks on
// purpose (a warning's rule and message start so): it names no license,
// and the streamed events' schemas are referenced from x-sse-events, an
// extension Redocly does not follow.
var acceptedWarnings = []string{
	"info-license ",
	`no-unused-components Component: "StreamSession"`, `no-unused-components Component: "StreamDelta"`,
	`no-unused-components Component: "TurnModelDone"`, `no-unused-components Component: "StreamModelError"`,
}

// redoclyProblems lists Redocly's errors, and its warnings but the accepted.
func redoclyProblems(out string) []string {
	var problems []string
	for _, m := range redoclyProblem.FindAllStringSubmatch(out, -1) {
		finding := m[2] + " " + m[3]
		accepted := slices.ContainsFunc(acceptedWarnings, func(w string) bool { return strings.HasPrefix(finding, w) })
		if m[1] == "error" || !accepted {
			problems = append(problems, m[1]+" "+finding)
		}
	}
	return problems
}

// The lint check reads Redocly's answer (as 2.77.0 prints it): errors and
// unexpected warnings are problems, the accepted warnings are not.
func TestRedoclyProblems(t *testing.T) {
	t.Parallel()
	const valid = `validating openapi.json...
openapi.json:
  1954:3  warning  info-license          Info object should contain ` + "`license`" + ` field.
  1715:7  warning  no-unused-components  Component: "StreamDelta" is never used.

openapi.json: validated in 607ms

Woohoo! Your API description is valid. 🎉
You have 2 warnings.
`
	const invalid = `validating bad.json...
bad.json:
  1:43188  error    operation-operationId-unique  Every operation must have a unique ` + "`operationId`" + `.
  1:44168  error    no-unresolved-refs            Can't resolve $ref
  1:22058  warning  info-license                  Info object should contain ` + "`license`" + ` field.
  1:19386  warning  no-unused-components          Component: "Agent" is never used.

bad.json: validated in 533ms

❌ Validation failed with 2 errors and 2 warnings.
`
	if got := redoclyProblems(valid); len(got) != 0 || !strings.Contains(valid, redoclyValid) {
		t.Errorf("a valid document: problems %q", got)
	}
	want := []string{
		"error operation-operationId-unique Every operation must have a unique `operationId`.",
		"error no-unresolved-refs Can't resolve $ref",
		`warning no-unused-components Component: "Agent" is never used.`,
	}
	if got := redoclyProblems(invalid); !slices.Equal(got, want) {
		t.Errorf("an invalid document: problems %q, want %q", got, want)
	}
}

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
// Redocly's recommended rules with no error (and no warning but the
// accepted), and a TypeScript client generated from it (openapi-typescript)
// type-checks a program that creates an agent and reads the headers the
// document declares (X-Event-Position, Location, X-Request-ID,
// X-Projection-Pending, Retry-After) with their types.
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
	if problems := redoclyProblems(out); err != nil || len(problems) > 0 || !strings.Contains(out, redoclyValid) {
		t.Errorf("redocly lint: %v; problems %q, want none and %q; it said:\n%s", err, problems, redoclyValid, out)
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
