// Package pgbatch deletes a table's expired rows in batches, for the
// janitor and the rate limiter's prune, which must behave the same.
package pgbatch

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Delete deletes the rows of table that match where (a condition whose $1
// is arg) in DELETEs of at most batch rows, one after another until one
// deletes fewer, so that none holds a long transaction; done is told each
// DELETE's count. Rows another transaction holds are skipped (SKIP LOCKED)
// and wait for the next run, rather than a DELETE waiting for them with
// every row it deleted so far locked (and whoever needs those waiting
// too). Each DELETE may take timeout. It returns the rows deleted, those
// of the DELETEs that completed when it fails. table and where are the
// caller's own text, never a user's.
func Delete(ctx context.Context, db *pgxpool.Pool, table, where string, arg any, batch int, timeout time.Duration,
	done func(n int64)) (int64, error) {
	sql := Statement(table, where, batch)
	var total int64
	for {
		sctx, cancel := context.WithTimeout(ctx, timeout)
		tag, err := db.Exec(sctx, sql, arg)
		cancel()
		if err != nil {
			return total, err
		}
		n := tag.RowsAffected()
		total += n
		if done != nil {
			done(n)
		}
		if n < int64(batch) {
			return total, nil
		}
	}
}

// Statement is the DELETE that Delete runs, batch by batch: for a test
// that holds it to reading an index (pgtest.Explain).
func Statement(table, where string, batch int) string {
	return fmt.Sprintf(`DELETE FROM %[1]s WHERE ctid IN (SELECT ctid FROM %[1]s WHERE %[2]s LIMIT %[3]d FOR UPDATE SKIP LOCKED)`,
		table, where, batch)
}
