package main

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
)

// privateClusterDir is where `make run` keeps its PostgreSQL cluster and
// signing key, relative to the directory lectern runs in (the checkout).
const privateClusterDir = ".data"

// databaseURL is DATABASE_URL, or else the URL of `make run`'s private
// cluster when there is one under .data/pg (scripts/pg.sh: a unix socket in
// the data directory, port 5433, database lectern).
func databaseURL() (string, error) {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u, nil
	}
	dir, err := filepath.Abs(filepath.Join(privateClusterDir, "pg"))
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); err != nil {
		return "", errors.New("DATABASE_URL is not set, and there is no private cluster under .data/pg (make run starts one)")
	}
	q := url.Values{"host": {dir}, "port": {"5433"}, "user": {"postgres"}, "sslmode": {"disable"}}
	return "postgres:///lectern?" + q.Encode(), nil
}

// defaultKeyFile is `make run`'s signing key, if it made one.
func defaultKeyFile() string { return defaultFile("jwt.key") }

// defaultFile is the absolute path of name under make run's .data/, if it
// exists there.
func defaultFile(name string) string {
	p, err := filepath.Abs(filepath.Join(privateClusterDir, name))
	if err != nil {
		return ""
	}
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}
