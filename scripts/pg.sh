#!/usr/bin/env bash
# pg.sh: a private PostgreSQL cluster for Lectern, started from the locally
# installed server binaries. It listens only on a unix socket inside its data
# directory, so it never collides with a server on port 5432.
#
#   scripts/pg.sh start DIR   initialise (once) and start; prints DATABASE_URL
#   scripts/pg.sh stop DIR    stop it
#   scripts/pg.sh url DIR     print DATABASE_URL
#
# PostgreSQL refuses to run as root: when called as root the cluster runs as the
# unprivileged `postgres` account (or $LECTERN_PG_USER). LECTERN_PG_PRELOAD sets
# shared_preload_libraries of a new cluster (make bench: pg_stat_statements).
set -euo pipefail

port=5433
dbname=lectern

die() { echo "pg.sh: $*" >&2; exit 1; }

find_bindir() {
    if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
        pg_config --bindir; return
    fi
    local d
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r) /usr/local/pgsql/bin /opt/homebrew/bin /usr/local/bin; do
        if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then echo "$d"; return; fi
    done
    if command -v initdb >/dev/null 2>&1; then dirname "$(command -v initdb)"; return; fi
    die "no PostgreSQL server binaries (initdb, pg_ctl) found.
Install them (Debian/Ubuntu: apt-get install postgresql; Fedora: dnf install postgresql-server;
macOS: brew install postgresql@16), or set DATABASE_URL to an existing database."
}

# as_owner runs a command as the cluster's owner.
as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u "$owner" -- "$@"
    else
        "$@"
    fi
}

url() { echo "postgres:///$dbname?host=$dir&port=$port&user=postgres&sslmode=disable"; }

start() {
    bindir=$(find_bindir)
    mkdir -p "$dir"
    if [ "$(id -u)" = 0 ]; then
        id "$owner" >/dev/null 2>&1 || die "running as root, but there is no '$owner' account to run PostgreSQL as (set LECTERN_PG_USER)"
        chown "$owner" "$dir"
        chmod 700 "$dir"
        as_owner test -x "$dir" || die "the '$owner' account cannot reach $dir: choose a directory it can traverse"
    fi
    if [ ! -f "$dir/PG_VERSION" ]; then
        as_owner "$bindir/initdb" -D "$dir" -U postgres --auth=trust --encoding=UTF8 --no-locale >"$dir.initdb.log" 2>&1 \
            || { cat "$dir.initdb.log" >&2; die "initdb failed"; }
        rm -f "$dir.initdb.log"
        cat >>"$dir/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$dir'
port = $port
max_connections = 200
shared_buffers = 128MB
fsync = ${LECTERN_PG_FSYNC:-on}
synchronous_commit = ${LECTERN_PG_SYNC_COMMIT:-on}
full_page_writes = ${LECTERN_PG_FSYNC:-on}
shared_preload_libraries = '${LECTERN_PG_PRELOAD:-}'
CONF
    fi
    if ! as_owner "$bindir/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
        as_owner "$bindir/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 start >/dev/null \
            || { tail -n 20 "$dir/server.log" >&2; die "the server did not start"; }
    fi
    if ! "$bindir/psql" -h "$dir" -p "$port" -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='$dbname'" | grep -q 1; then
        "$bindir/psql" -h "$dir" -p "$port" -U postgres -d postgres -qc "CREATE DATABASE $dbname" >/dev/null
    fi
    url
}

stop() {
    bindir=$(find_bindir)
    [ -f "$dir/PG_VERSION" ] || return 0
    as_owner "$bindir/pg_ctl" -D "$dir" -m fast -w stop >/dev/null 2>&1 || true
}

[ $# -eq 2 ] || die "usage: pg.sh start|stop|url DIR"
owner=${LECTERN_PG_USER:-postgres}
mkdir -p "$2"
dir=$(cd "$2" && pwd)
case "$1" in
    start) start ;;
    stop) stop ;;
    url) url ;;
    *) die "usage: pg.sh start|stop|url DIR" ;;
esac
