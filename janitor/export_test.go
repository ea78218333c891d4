package janitor

import (
	"time"

	"lectern/pgbatch"
)

// Purge is one of the janitor's own purges: its table, and the DELETE it
// runs batch by batch, with its argument for a run started at now.
type Purge struct {
	Table, SQL string
	Arg        time.Time
}

// Purges are j's own purges, for a run started at now.
func (j *Janitor) Purges(now time.Time) []Purge {
	out := make([]Purge, 0, len(purges))
	for _, p := range purges {
		out = append(out, Purge{Table: p.table, SQL: pgbatch.Statement(p.table, p.where, BatchSize), Arg: p.arg(j, now)})
	}
	return out
}
