#!/usr/bin/env bash
# test.sh: make test's runs, under scripts/with-postgres.sh --per-package
# (each test binary starts a PostgreSQL cluster of its own).
#  1. every package under -race; at the same time, the HTTP suite again with
#     the in-process fake EventStoreDB as the event store (only api/ reads
#     LECTERN_TEST_EVENT_STORE). The two runs overlap because much of each
#     is waiting (for PostgreSQL, for projections, for child processes),
#     and the second one's output is printed after the first's.
#  2. then the API is fuzzed for FUZZTIME with malformed input
#     (FuzzOperations; its seeds already ran in 1).
set -uo pipefail
go=${GO:-go}
esdb_log=$(mktemp "${TMPDIR:-/tmp}/lectern-esdbfake.XXXXXX")
trap 'rm -f "$esdb_log"' EXIT

LECTERN_TEST_EVENT_STORE=esdbfake $go test -race -count=1 -skip FuzzOperations ./api/ >"$esdb_log" 2>&1 &
esdb=$!
$go test -race -count=1 ./...
all=$?
wait "$esdb"
esdb_status=$?
echo "# the HTTP suite with the fake EventStoreDB (LECTERN_TEST_EVENT_STORE=esdbfake):"
cat "$esdb_log"
if [ "$all" -ne 0 ] || [ "$esdb_status" -ne 0 ]; then
    exit 1
fi
exec $go test -count=1 -run '^$' -fuzz '^FuzzOperations$' -fuzztime "${FUZZTIME:-30s}" ./api/
