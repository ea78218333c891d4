package projections

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"lectern/events"
)

// Loader is a second way to apply some of a projection's event types, for a
// replay's catch-up into empty tables: it folds their events in memory and
// hands over finished rows, which the replay writes with COPY. Where most
// events of a stream update one row (a session's turns), that writes each
// row once instead of once per event (make bench, replay).
//
// A loader must leave its tables exactly as the handlers of its types would
// (each loader's test holds it to its handlers), and those handlers must
// write only tables that no other handler writes: the replay runs the
// projection's other handlers beside it. Once the catch-up has read the log,
// the handlers take over again, on the loaded tables.
type Loader interface {
	// Types are the event types it folds in place of their handlers.
	Types() []string
	// Fold applies one event, decoded as its handler would receive it (a
	// pointer to the event), in log order.
	Fold(m events.Meta, e any) error
	// Rows hands over rows to write: while the log is being read (final
	// false), the rows no later event can change, once enough have gathered
	// (it may return none); once the log is read (final true), all the rest.
	Rows(final bool) ([]TableRows, error)
}

// TableRows are rows to COPY into one table.
type TableRows struct {
	Table   string
	Columns []string
	Rows    [][]any
}

// copyRows writes rows into the tables that unqualified names resolve to.
func copyRows(ctx context.Context, tx pgx.Tx, tables []TableRows) error {
	for _, t := range tables {
		if len(t.Rows) == 0 {
			continue
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{t.Table}, t.Columns, pgx.CopyFromRows(t.Rows)); err != nil {
			return fmt.Errorf("copy into %s: %w", t.Table, err)
		}
	}
	return nil
}
