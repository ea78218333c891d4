#!/usr/bin/env bash
# run.sh: serve Lectern on $PORT (default 8080) with the embedded defaults.
# Without DATABASE_URL a private PostgreSQL cluster is started under .data/pg;
# without LECTERN_JWT_KEY a signing key, and without LECTERN_DATA_KEY a data
# key, are generated under .data/.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .data
if [ -z "${DATABASE_URL:-}" ]; then
    DATABASE_URL=$(scripts/pg.sh start "$PWD/.data/pg")
    export DATABASE_URL
    echo "run: private PostgreSQL in .data/pg (stop it with: make stop-db)"
fi
if [ -z "${LECTERN_JWT_KEY:-}" ] && [ -z "${LECTERN_JWT_KEY_FILE:-}" ]; then
    export LECTERN_JWT_KEY_FILE="$PWD/.data/jwt.key"
fi
# The master key of personal data (docs/privacy.md), generated likewise.
if [ -z "${LECTERN_DATA_KEY:-}" ] && [ -z "${LECTERN_DATA_KEY_FILE:-}" ]; then
    export LECTERN_DATA_KEY_FILE="$PWD/.data/data.key"
fi
go build -o .data/lectern ./cmd/lectern
exec .data/lectern serve
