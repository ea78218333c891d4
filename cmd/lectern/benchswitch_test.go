package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// The session check can be turned off only in the bench's build; any other
// build ignores the switch, and says so.
func TestBenchSwitchOnlyInTheBenchBuild(t *testing.T) {
	t.Setenv(benchClearEventsEnv, "1")
	var clear bytes.Buffer
	if got := benchClearEvents(slog.New(slog.NewTextHandler(&clear, nil))); got != benchBuild {
		t.Errorf("with %s=1 events are stored in clear: %v; want %v (bench build)", benchClearEventsEnv, got, benchBuild)
	}
	if !strings.Contains(clear.String(), "level=WARN") {
		t.Errorf("no warning logged: %q", clear.String())
	}
	t.Setenv(benchSkipSessionCheckEnv, "1")
	var logged bytes.Buffer
	skip := benchSkipSessionCheck(slog.New(slog.NewTextHandler(&logged, nil)))
	if skip != benchBuild {
		t.Errorf("with %s=1 the check is skipped: %v; want %v (bench build: %v)", benchSkipSessionCheckEnv, skip, benchBuild, benchBuild)
	}
	if !strings.Contains(logged.String(), "level=WARN") {
		t.Errorf("no warning logged: %q", logged.String())
	}
	t.Setenv(benchSkipSessionCheckEnv, "")
	if benchSkipSessionCheck(slog.New(slog.NewTextHandler(&logged, nil))) {
		t.Error("the check is skipped without the switch")
	}
}
