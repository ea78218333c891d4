package main

import (
	"log/slog"
	"os"
)

// The bench's switches: each turns off one safeguard so that the bench can
// measure what it costs, in one run.
const (
	// benchSkipSessionCheckEnv turns the per-request session check off.
	benchSkipSessionCheckEnv = "LECTERN_BENCH_SKIP_SESSION_CHECK"
	// benchClearEventsEnv stores personal fields in clear (no data key).
	benchClearEventsEnv = "LECTERN_BENCH_CLEAR_EVENTS"
)

// benchBuild is true only in a build with -tags lectern_bench (benchbuild.go),
// which is how cmd/lectern-bench builds the server it measures.
var benchBuild bool

// benchSkipSessionCheck reports whether the session check is off.
func benchSkipSessionCheck(log *slog.Logger) bool {
	return benchSwitch(log, benchSkipSessionCheckEnv,
		"access tokens are trusted alone (logged-out tokens and changed roles count only when the token expires)")
}

// benchClearEvents reports whether events are stored with personal fields in
// clear.
func benchClearEvents(log *slog.Logger) bool {
	return benchSwitch(log, benchClearEventsEnv, "personal fields are stored in clear and cannot be erased")
}

// benchSwitch reports whether the switch env is on: only in the bench's
// build, and only when the bench asks. Any other build ignores the switch,
// saying so, so that no production server can run without the safeguard and
// nobody believes it does.
func benchSwitch(log *slog.Logger, env, consequence string) bool {
	v := os.Getenv(env)
	switch {
	case v == "":
		return false
	case !benchBuild:
		log.Warn(env + " is ignored: only the bench's build (-tags lectern_bench) can turn the safeguard off")
		return false
	case v != "1":
		return false
	}
	log.Warn(env + "=1: " + consequence + "; a bench-only build")
	return true
}
