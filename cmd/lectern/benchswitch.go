package main

import (
	"log/slog"
	"os"
)

// benchSkipSessionCheckEnv names the bench's switch that turns the
// per-request session check off, so that the bench can measure its cost.
const benchSkipSessionCheckEnv = "LECTERN_BENCH_SKIP_SESSION_CHECK"

// benchBuild is true only in a build with -tags lectern_bench (benchbuild.go),
// which is how cmd/lectern-bench builds the server it measures.
var benchBuild bool

// benchSkipSessionCheck reports whether the session check is off: only in
// the bench's build, and only when the bench asks. Any other build ignores
// the switch, saying so, so that no production server can run without the
// check and nobody believes it does.
func benchSkipSessionCheck(log *slog.Logger) bool {
	v := os.Getenv(benchSkipSessionCheckEnv)
	switch {
	case v == "":
		return false
	case !benchBuild:
		log.Warn(benchSkipSessionCheckEnv + " is ignored: only the bench's build (-tags lectern_bench) can skip the session check")
		return false
	case v != "1":
		return false
	}
	log.Warn(benchSkipSessionCheckEnv + "=1: access tokens are trusted alone (logged-out tokens and changed roles count only when the token expires); a bench-only build")
	return true
}
