package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"lectern/eventstore"
)

// Rewrite passes every event of the log to fn, in log order, and stores the
// data fn returns for those it changes, each in place of the data fn was
// given (an event changed meanwhile is left alone and not counted). It is
// for rewriting a history once, as sealing the events appended before their
// personal fields were sealed; the events keep their ids, positions and
// everything else. It returns the events read and rewritten.
func (s *Store) Rewrite(ctx context.Context, fn func(e eventstore.RecordedEvent) (data json.RawMessage, changed bool, err error)) (read, rewritten int, err error) {
	var after eventstore.Position
	for {
		// Every stored event, in log order: without ReadAll's horizon, which
		// would stop at events that another transaction still open holds
		// back, and leave them as they are.
		rows, err := s.db.Query(ctx, `SELECT `+selectColumns+` FROM events
			WHERE (transaction_id, "offset") > ($1::text::xid8, $2)
			ORDER BY events.transaction_id, events."offset" LIMIT $3`,
			strconv.FormatUint(after.Commit, 10), int64(after.Prepare), rewritePage)
		if err != nil {
			return read, rewritten, fmt.Errorf("read the log: %w", err)
		}
		page, err := scanEvents(rows, rewritePage)
		if err != nil {
			return read, rewritten, err
		}
		for _, e := range page {
			data, changed, err := fn(e)
			if err != nil {
				return read, rewritten, fmt.Errorf("event %s (%s at %s): %w", e.ID, e.Type, e.Position, err)
			}
			read++
			if !changed {
				continue
			}
			tag, err := s.db.Exec(ctx, `UPDATE events SET payload = $1::json
				WHERE transaction_id = $2::text::xid8 AND "offset" = $3 AND payload::text = $4`,
				string(data), strconv.FormatUint(e.Position.Commit, 10), int64(e.Position.Prepare), string(e.Data))
			if err != nil {
				return read, rewritten, fmt.Errorf("rewrite event %s: %w", e.ID, err)
			}
			rewritten += int(tag.RowsAffected())
		}
		if len(page) < rewritePage {
			return read, rewritten, nil
		}
		after = page[len(page)-1].Position
	}
}

// rewritePage is the events Rewrite reads at a time.
const rewritePage = 500
