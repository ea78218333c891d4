#!/usr/bin/env bash
# test.sh: make test's runs, under scripts/with-postgres.sh --per-package
# (each test binary starts a PostgreSQL cluster of its own), one after the
# other (run side by side on two cores, the two HTTP passes each took three
# times as long, and the whole ran longer):
#  1. every package under -race;
#  2. the HTTP suite again with the in-process fake EventStoreDB as the event
#     store (only api/ reads LECTERN_TEST_EVENT_STORE), less the export's
#     memory test (the handler's heap, whatever the store: pass 1 has it);
#  3. the API fuzzed for FUZZTIME with malformed input (FuzzOperations; its
#     seeds already ran in 1). New inputs are not minimized: the engine kills
#     a worker whose minimizing outlasts -fuzzminimizetime, and a new worker
#     starts a cluster of its own (with minimizing, 1 000-5 000 inputs ran in
#     30 s; without, 16 000). Each run starts from the seeds, in a corpus
#     directory of its own: the inputs found pile up in the build cache's
#     otherwise (235 in one run), and gathering their coverage first would
#     take longer every run.
#  4. sealing fuzzed for FUZZTIME (FuzzSealingLosesNothing): every event
#     type with personal fields, sealed and opened both ways, gives back
#     every text it was given, whatever a user typed. No database.
set -euo pipefail
go=${GO:-go}
$go test -race -count=1 ./...
LECTERN_TEST_EVENT_STORE=esdbfake $go test -race -count=1 -skip 'FuzzOperations|TestExportMemoryStaysFlat' ./api/
corpus=$(mktemp -d "${TMPDIR:-/tmp}/lectern-fuzz.XXXXXX")
trap 'rm -rf "$corpus"' EXIT
$go test -count=1 -run '^$' -fuzz '^FuzzOperations$' -fuzztime "${FUZZTIME:-30s}" -fuzzminimizetime 0 ./api/ \
    -args -test.fuzzcachedir="$corpus"
$go test -count=1 -run '^$' -fuzz '^FuzzSealingLosesNothing$' -fuzztime "${FUZZTIME:-30s}" ./personal/ \
    -args -test.fuzzcachedir="$corpus/personal"
