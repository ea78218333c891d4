#!/usr/bin/env bash
# with-postgres.sh CMD...: runs CMD with DATABASE_URL pointing at PostgreSQL.
# When DATABASE_URL is already set it is used as it is; otherwise a throwaway
# cluster is started in a temporary directory and removed afterwards.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ -n "${DATABASE_URL:-}" ]; then
    exec "$@"
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lectern-test-pg.XXXXXX")
chmod 755 "$tmp"
cleanup() { "$here/pg.sh" stop "$tmp/pg" || true; rm -rf "$tmp"; }
trap cleanup EXIT
# A throwaway cluster need not survive a crash: skipping fsync keeps tests fast.
DATABASE_URL=$(LECTERN_PG_FSYNC=off LECTERN_PG_SYNC_COMMIT=off "$here/pg.sh" start "$tmp/pg")
export DATABASE_URL
echo "with-postgres: throwaway cluster at $tmp/pg"
"$@"
