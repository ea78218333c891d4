package postgres

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"lectern/eventstore"
)

var _ eventstore.LogScanner = (*Store)(nil)

// ScanAll implements eventstore.LogScanner: one query, whose rows are passed
// to fn as they arrive, decoded from their binary form in place (nothing is
// copied or allocated per event).
func (s *Store) ScanAll(ctx context.Context, after, end eventstore.Position, limit int, fn func(*eventstore.RawEvent) error) (int, error) {
	if limit <= 0 {
		limit = 1000
	}
	// end is a LogEnder's, so every event before it is visible; the horizon
	// of ReadAll stays, so that a wrong end cannot skip a late commit.
	rows, err := s.db.Query(ctx, `SELECT `+scanColumns+` FROM events
		WHERE (transaction_id, "offset") > ($1::text::xid8, $2)
		  AND (transaction_id, "offset") < ($3::text::xid8, $4)
		  AND transaction_id < pg_snapshot_xmin(pg_current_snapshot())
		ORDER BY events.transaction_id, events."offset" LIMIT $5`,
		pgx.QueryResultFormats{pgx.BinaryFormatCode},
		strconv.FormatUint(after.Commit, 10), int64(after.Prepare), strconv.FormatUint(end.Commit, 10), int64(end.Prepare), limit)
	if err != nil {
		return 0, fmt.Errorf("scan the log: %w", err)
	}
	defer rows.Close()
	if fds := rows.FieldDescriptions(); len(fds) != scanColumnCount {
		return 0, fmt.Errorf("scan the log: %d columns, want %d", len(fds), scanColumnCount)
	}
	n := 0
	var e eventstore.RawEvent
	for rows.Next() {
		if err := decodeRaw(rows.RawValues(), &e); err != nil {
			return n, fmt.Errorf("scan the log: %w", err)
		}
		if err := fn(&e); err != nil {
			return n, err
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return n, fmt.Errorf("scan the log: %w", err)
	}
	return n, nil
}

// scanColumns are selectColumns, each in a type whose binary form decodeRaw
// reads (xid8's is its 64 bits).
const (
	scanColumns     = `uuid, stream_id, version, transaction_id, "offset", event_type, schema_version, payload::text, metadata::text, recorded_at`
	scanColumnCount = 10
)

// y2k is PostgreSQL's epoch, in Unix seconds.
const y2k = 946_684_800

// decodeRaw decodes a row of scanColumns in binary format into e.
func decodeRaw(v [][]byte, e *eventstore.RawEvent) error {
	if len(v) != scanColumnCount {
		return fmt.Errorf("%d columns, want %d", len(v), scanColumnCount)
	}
	for _, i := range []int{0, 1, 2, 3, 4, 5, 6, 9} { // NOT NULL
		if v[i] == nil {
			return fmt.Errorf("column %d is null", i)
		}
	}
	if len(v[0]) != 16 || len(v[2]) != 8 || len(v[3]) != 8 || len(v[4]) != 8 || len(v[6]) != 4 || len(v[9]) != 8 {
		return fmt.Errorf("a column's binary value has the wrong size")
	}
	copy(e.ID[:], v[0])
	e.StreamID = v[1]
	e.Version = int64(binary.BigEndian.Uint64(v[2]))
	e.Position = eventstore.Position{Commit: binary.BigEndian.Uint64(v[3]), Prepare: binary.BigEndian.Uint64(v[4])}
	e.Type = v[5]
	e.SchemaVersion = int(int32(binary.BigEndian.Uint32(v[6])))
	e.Data, e.Metadata = v[7], v[8]
	us := int64(binary.BigEndian.Uint64(v[9]))
	if us == math.MaxInt64 || us == math.MinInt64 {
		return fmt.Errorf("event %s: recorded at infinity", e.ID)
	}
	e.RecordedAt = time.Unix(y2k+us/1_000_000, us%1_000_000*1000).UTC()
	return nil
}
