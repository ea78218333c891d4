#!/usr/bin/env bash
# test.sh: make test's runs, under scripts/with-postgres.sh --per-package
# (each test binary starts a PostgreSQL cluster of its own), one after the
# other (run side by side on two cores, the two HTTP passes each took three
# times as long, and the whole ran longer):
#  1. every package under -race;
#  2. the HTTP suite again with the in-process fake EventStoreDB as the event
#     store (only api/ reads LECTERN_TEST_EVENT_STORE);
#  3. the API fuzzed for FUZZTIME with malformed input (FuzzOperations; its
#     seeds already ran in 1). Each new input is minimized for at most 5 s
#     (the default, 60 s, let minimizing take half the run: 0 execs/s).
set -euo pipefail
go=${GO:-go}
$go test -race -count=1 ./...
LECTERN_TEST_EVENT_STORE=esdbfake $go test -race -count=1 -skip FuzzOperations ./api/
exec $go test -count=1 -run '^$' -fuzz '^FuzzOperations$' -fuzztime "${FUZZTIME:-30s}" -fuzzminimizetime 5s ./api/
