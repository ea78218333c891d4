#!/usr/bin/env bash
# with-postgres.sh [--per-package] CMD...: runs CMD with PostgreSQL.
# When DATABASE_URL is already set it is used as it is. Otherwise a throwaway
# cluster is started in a temporary directory (DATABASE_URL points at it) and
# removed afterwards; with --per-package, no cluster is started here: each Go
# test binary starts its own under LECTERN_TEST_PG_DIR (the pgtest package),
# so that no package's open transaction holds back another's log horizon.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
per_package=
if [ "${1:-}" = --per-package ]; then
    per_package=1
    shift
fi
if [ -n "${DATABASE_URL:-}" ]; then
    exec "$@"
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lectern-test-pg.XXXXXX")
chmod 755 "$tmp"
cleanup() {
    for d in "$tmp"/pg "$tmp"/pkg-*/pg; do
        [ -d "$d" ] && { "$here/pg.sh" stop "$d" >/dev/null 2>&1 || true; }
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
if [ -n "$per_package" ]; then
    export LECTERN_TEST_PG_DIR="$tmp" LECTERN_PG_SH="$here/pg.sh"
    echo "with-postgres: a throwaway cluster per test package under $tmp"
else
    # A throwaway cluster need not survive a crash: skipping fsync keeps it fast.
    DATABASE_URL=$(LECTERN_PG_FSYNC=off LECTERN_PG_SYNC_COMMIT=off "$here/pg.sh" start "$tmp/pg")
    export DATABASE_URL
    echo "with-postgres: throwaway cluster at $tmp/pg"
fi
"$@"
