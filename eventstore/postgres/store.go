// Package postgres is the PostgreSQL event store: one `events` table that is
// also the Watermill topic projections consume.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/eventstore"
)

// Querier is a pool, a connection or a transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Store is the PostgreSQL event store.
type Store struct {
	db  *pgxpool.Pool
	now func() time.Time

	// Announcing appends to other processes (below).
	epoch      time.Time     // the zero of clock
	notifyMu   sync.Mutex    // serialises the changes of the three below
	lastNotify atomic.Int64  // clock when the last NOTIFY was sent
	pending    atomic.Bool   // a commit may not be followed by a NOTIFY yet
	armed      atomic.Bool   // the notifier watches pending
	commits    atomic.Int64  // commits recorded by unannounced
	types      eventTypes    // the event types of commits not yet announced
	wake       chan struct{} // wakes the notifier
	wakeOnce   sync.Once
	stop       chan struct{}
	stopOnce   sync.Once
	onAppend   func(types []string)
	// since measures clock from epoch: time.Since, but a test may stop it.
	since func(time.Time) time.Duration

	// The group commit of single-event appends (batch.go).
	batchMu  sync.Mutex
	queue    []*pendingAppend
	flushing int // statements in flight
	inFlight int // their appends
	writers  concurrency
	batches  atomic.Int64 // multi-row statements sent
	heads    heads
}

// OnAppend sets a function called after every committed Append with the
// appended events' types: a process wakes its own subscribers without
// waiting for the NOTIFY.
func (s *Store) OnAppend(f func(types []string)) { s.onAppend = f }

var _ eventstore.Store = (*Store)(nil)

// New returns a store on db. now stamps events appended without a recorded time.
func New(db *pgxpool.Pool, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	s := &Store{db: db, now: now, epoch: time.Now(), since: time.Since, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	s.lastNotify.Store(-int64(time.Hour)) // the first statement carries a NOTIFY
	return s
}

// Close stops the store's notifier.
func (s *Store) Close() { s.stopOnce.Do(func() { close(s.stop) }) }

// announce follows a commit of events of the given types (nil: not known)
// that carried no NOTIFY: it wakes this process's subscribers and has the
// commit announced to the others.
func (s *Store) announce(types []string) {
	if s.onAppend != nil {
		s.onAppend(types)
	}
	s.unannounced(types)
}

// Appends are announced to other processes with a NOTIFY on EventsChannel,
// at most one per notifyInterval, never one per append: a NOTIFY costs a
// transaction of its own, and notifying commits are serialised on the
// notification queue's lock. The statement of grouped appends (batch.go)
// sent once notifyInterval has passed since the last NOTIFY carries one: the
// NOTIFY goes in the statement's implicit transaction, in the same round trip
// (no transaction, round trip or goroutine of its own), and listeners get it
// as the events commit. A commit that carried none (the appends between two
// carriers, appends made otherwise) is announced by the next carrier, or, if
// none is sent within notifySlack after the interval, by the notifier
// goroutine's own NOTIFY. So under load listeners hear of an append at most
// notifyInterval after it commits (plus a statement), of the last ones before
// a pause at most notifyInterval+notifySlack after, and of a lone append as it
// commits. (The notifier sleeps about notifySlack at a time while appends go
// on; a shorter slack costs more wake-ups than it saves latency.)
const (
	notifyInterval = 2 * time.Millisecond
	notifySlack    = 2 * time.Millisecond
)

// notifySQL announces appends; its payload names their event types,
// comma-separated, or is empty when they are not known (see EventTypes).
const notifySQL = `SELECT pg_notify('` + EventsChannel + `', $1)`

// clock is the time since the store was made, on the monotonic clock.
func (s *Store) clock() int64 { return int64(s.since(s.epoch)) }

// carry reports whether the statement about to be sent, appending events
// of the given types, should carry a NOTIFY, and if so counts the NOTIFY as
// sent now and returns its payload. It returns the commits recorded so far:
// they precede the carrier's commit, and announced clears them once it has
// committed.
func (s *Store) carry(types []string) (bool, string, int64) {
	now := s.clock()
	if now-s.lastNotify.Load() < int64(notifyInterval) {
		return false, "", 0
	}
	s.notifyMu.Lock()
	defer s.notifyMu.Unlock()
	if now-s.lastNotify.Load() < int64(notifyInterval) {
		return false, "", 0
	}
	s.lastNotify.Store(now)
	return true, s.types.payload(types), s.commits.Load()
}

// announced follows the commit of a carrier sent when commits recorded were
// the count carry returned: none is pending any more unless one was recorded
// since.
func (s *Store) announced(commits int64) {
	s.notifyMu.Lock()
	if s.commits.Load() == commits {
		s.pending.Store(false)
		s.types.reset()
	}
	s.notifyMu.Unlock()
}

// unannounced records a commit of events of the given types (nil: not
// known) that no NOTIFY sent so far is known to follow, and makes sure the
// notifier watches. When commits are pending and watched already, the NOTIFY
// that clears them (the notifier's, or a carrier's sent after this call)
// follows this commit too.
func (s *Store) unannounced(types []string) {
	s.notifyMu.Lock()
	s.commits.Add(1)
	s.types.add(types)
	if s.pending.Load() && s.armed.Load() {
		s.notifyMu.Unlock()
		return
	}
	s.pending.Store(true)
	arm := !s.armed.Load()
	s.armed.Store(true)
	s.notifyMu.Unlock()
	if arm {
		s.wakeOnce.Do(func() { go s.notifier() })
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// notifier sends a NOTIFY when commits are pending and no NOTIFY was sent
// for notifyInterval+notifySlack, and sleeps while none are pending.
func (s *Store) notifier() {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.wake:
		}
		for {
			s.notifyMu.Lock()
			if !s.pending.Load() {
				s.armed.Store(false)
				s.notifyMu.Unlock()
				break
			}
			now := s.clock()
			wait := time.Duration(s.lastNotify.Load() + int64(notifyInterval+notifySlack) - now)
			var payload string
			if wait <= 0 {
				s.lastNotify.Store(now)
				s.pending.Store(false)
				payload = s.types.payload(nil)
				s.types.reset()
			}
			s.notifyMu.Unlock()
			if wait > 0 {
				timer.Reset(wait)
				select {
				case <-s.stop:
					timer.Stop()
					return
				case <-timer.C:
				}
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = s.db.Exec(ctx, notifySQL, payload)
			cancel()
		}
	}
}

// appendSQL checks the expected version and inserts every event in one
// statement, so an append costs one round trip. Two writers racing for the
// same version collide on UNIQUE (stream_id, version).
//
// An "any" append of event ids the stream already holds writes nothing (the
// retry of an append that succeeded); other preconditions catch a retry by
// the version.
const appendSQL = `
WITH cur AS (SELECT coalesce(max(version), 0) AS v FROM events WHERE stream_id = $1)
INSERT INTO events (uuid, payload, metadata, stream_id, version, event_type, schema_version, recorded_at)
SELECT x.id, x.data, x.meta, $1, cur.v + x.n, x.typ, x.sv, x.rec
FROM cur, unnest($2::uuid[], $3::json[], $4::json[], $5::text[], $6::int[], $7::timestamptz[])
     WITH ORDINALITY AS x(id, data, meta, typ, sv, rec, n)
WHERE CASE $8::int WHEN 0 THEN NOT EXISTS (SELECT 1 FROM events e WHERE e.stream_id = $1 AND e.uuid = ANY($2::uuid[]))
                   WHEN 1 THEN cur.v = 0 WHEN 2 THEN cur.v > 0 ELSE cur.v = $9 END
RETURNING version, transaction_id::text, "offset"`

// appendExactSQL appends at a known version: no aggregate over the stream,
// only a check that the expected version exists (so no gap can open).
const appendExactSQL = `
INSERT INTO events (uuid, payload, metadata, stream_id, version, event_type, schema_version, recorded_at)
SELECT x.id, x.data, x.meta, $1, $8::bigint + x.n, x.typ, x.sv, x.rec
FROM unnest($2::uuid[], $3::json[], $4::json[], $5::text[], $6::int[], $7::timestamptz[])
     WITH ORDINALITY AS x(id, data, meta, typ, sv, rec, n)
WHERE $8::bigint = 0 OR EXISTS (SELECT 1 FROM events WHERE stream_id = $1 AND version = $8::bigint)
RETURNING version, transaction_id::text, "offset"`

// appendOneExactSQL is appendExactSQL for the common single event.
const appendOneExactSQL = `
INSERT INTO events (uuid, payload, metadata, stream_id, version, event_type, schema_version, recorded_at)
SELECT $2::uuid, $3::json, $4::json, $1::text, $7::bigint + 1, $5::text, $6::int, $8::timestamptz
WHERE $7::bigint = 0 OR EXISTS (SELECT 1 FROM events WHERE stream_id = $1::text AND version = $7::bigint)
RETURNING version, transaction_id::text, "offset"`

const (
	kindAny = iota
	kindNoStream
	kindStreamExists
	kindExact
)

// Append implements eventstore.Store.
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, evs []eventstore.EventData) (eventstore.AppendResult, error) {
	if v, ok := expected.Exactly(); ok && len(evs) == 1 {
		// Announced by the group commit.
		res, err := s.appendGrouped(ctx, stream, v, evs[0])
		if err == nil && s.onAppend != nil {
			s.onAppend([]string{evs[0].Type})
		}
		return res, err
	}
	// Only "any" may be retried after a collision: every other precondition is
	// decided by the first attempt.
	for attempt := 0; ; attempt++ {
		res, err := s.AppendIn(ctx, s.db, stream, expected, evs)
		if err == nil {
			s.heads.saw(stream, res.Version)
			s.announce(typesOf(evs))
		}
		if err == nil || !expected.IsAny() || !errors.Is(err, eventstore.ErrWrongExpectedVersion) || attempt == 10 {
			return res, err
		}
	}
}

// AppendIn appends within q, which may be an open transaction: the events
// become visible, and the append's outcome final, when it commits. Listeners
// are not woken (they notice at their next poll) unless the caller calls
// Announce after the commit.
func (s *Store) AppendIn(ctx context.Context, q Querier, stream string, expected eventstore.ExpectedVersion, evs []eventstore.EventData) (eventstore.AppendResult, error) {
	if len(evs) == 0 {
		return eventstore.AppendResult{}, errors.New("eventstore: append of no events")
	}
	n := len(evs)
	ids, data, metas, types, versions, recorded, err := s.encode(evs)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	kind, exact := kindAny, int64(0)
	if v, ok := expected.Exactly(); ok {
		kind, exact = kindExact, v
		if v == 0 {
			kind = kindNoStream
		}
	} else if !expected.IsAny() {
		kind = kindStreamExists
	}

	var rows pgx.Rows
	switch {
	case kind == kindExact || kind == kindNoStream:
		if n == 1 {
			rows, err = q.Query(ctx, appendOneExactSQL, stream, ids[0], data[0], metas[0], types[0], versions[0], exact, recorded[0])
		} else {
			rows, err = q.Query(ctx, appendExactSQL, stream, ids, data, metas, types, versions, recorded, exact)
		}
	default:
		rows, err = q.Query(ctx, appendSQL, stream, ids, data, metas, types, versions, recorded, kind, exact)
	}
	if err != nil {
		return eventstore.AppendResult{}, fmt.Errorf("append to %s: %w", stream, err)
	}
	var res eventstore.AppendResult
	count := 0
	for rows.Next() {
		var version int64
		var txid string
		var offset int64
		if err := rows.Scan(&version, &txid, &offset); err != nil {
			rows.Close()
			return eventstore.AppendResult{}, err
		}
		pos, err := position(txid, offset)
		if err != nil {
			rows.Close()
			return eventstore.AppendResult{}, err
		}
		if version > res.Version {
			res.Version = version
		}
		if pos.Compare(res.Position) > 0 {
			res.Position = pos
		}
		count++
	}
	rows.Close()
	err = rows.Err()
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "23505":
		// A concurrent writer took the version (perhaps with these very events).
		return s.idempotent(ctx, stream, expected, ids)
	case err != nil:
		return eventstore.AppendResult{}, fmt.Errorf("append to %s: %w", stream, err)
	case count == 0:
		return s.idempotent(ctx, stream, expected, ids)
	}
	return res, nil
}

// encode turns events into the append statements' columns.
func (s *Store) encode(evs []eventstore.EventData) (ids, data, metas, types []string, versions []int32, recorded []time.Time, err error) {
	n := len(evs)
	ids, data, metas, types = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	versions, recorded = make([]int32, n), make([]time.Time, n)
	size := 0
	for i, e := range evs {
		row, err := s.encodeOne(e)
		if err != nil {
			return nil, nil, nil, nil, nil, nil, err
		}
		if size += row.size; size > eventstore.MaxAppendBytes {
			return nil, nil, nil, nil, nil, nil, &eventstore.AppendTooLargeError{Size: appendSize(evs)}
		}
		ids[i], data[i], metas[i], types[i], versions[i], recorded[i] = row.id, string(row.data), string(row.meta), e.Type, row.sv, row.rec
	}
	return ids, data, metas, types, versions, recorded, nil
}

// encodedRow is an event's columns.
type encodedRow struct {
	id         string
	data, meta []byte // data is the event's own
	sv         int32
	rec        time.Time
	size       int // its record's size (eventstore.RecordSize)
}

// encodeOne is an event's columns (its size is for the caller to check).
func (s *Store) encodeOne(e eventstore.EventData) (encodedRow, error) {
	if e.ID == uuid.Nil {
		return encodedRow{}, errors.New("eventstore: event without id")
	}
	meta, err := gojson.Marshal(e.Metadata) // a tenth of an append's CPU with encoding/json
	if err != nil {
		return encodedRow{}, err
	}
	row := encodedRow{id: e.ID.String(), data: e.Data, meta: meta, sv: int32(max(e.SchemaVersion, 1)), rec: e.RecordedAt,
		size: eventstore.RecordSize(e.Type, e.Data, meta)}
	if row.data == nil {
		row.data = []byte{} // as the empty string it was: invalid JSON, not NULL
	}
	if row.rec.IsZero() {
		row.rec = s.now()
	}
	row.rec = row.rec.UTC().Truncate(time.Microsecond)
	return row, nil
}

// appendSize is the size of an append that is too large, for its error.
func appendSize(evs []eventstore.EventData) int {
	size := 0
	for _, e := range evs {
		meta, _ := gojson.Marshal(e.Metadata) // as encodeOne

		size += eventstore.RecordSize(e.Type, e.Data, meta)
	}
	return size
}

// idempotent answers an append that wrote nothing: success when every event
// id is already in the stream (a retry), else a wrong expected version.
// Announce wakes listeners after a caller committed an AppendIn, of events
// whose types it need not know.
func (s *Store) Announce() { s.announce(nil) }

func (s *Store) idempotent(ctx context.Context, stream string, expected eventstore.ExpectedVersion, ids []string) (eventstore.AppendResult, error) {
	rows, err := s.db.Query(ctx, `SELECT version, transaction_id::text, "offset" FROM events WHERE stream_id = $1 AND uuid = ANY($2::uuid[])`, stream, ids)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	defer rows.Close()
	var res eventstore.AppendResult
	found := 0
	for rows.Next() {
		var txid string
		var version, offset int64
		if err := rows.Scan(&version, &txid, &offset); err != nil {
			return eventstore.AppendResult{}, err
		}
		pos, err := position(txid, offset)
		if err != nil {
			return eventstore.AppendResult{}, err
		}
		if version > res.Version {
			res.Version, res.Position = version, pos
		}
		found++
	}
	if err := rows.Err(); err != nil {
		return eventstore.AppendResult{}, err
	}
	if found == len(ids) {
		return res, nil
	}
	return eventstore.AppendResult{}, fmt.Errorf("%w: stream %s, expected %s", eventstore.ErrWrongExpectedVersion, stream, expected)
}

const selectColumns = `uuid, stream_id, version, transaction_id::text, "offset", event_type, schema_version, payload::text, metadata::text, recorded_at`

// ReadStream implements eventstore.Store.
func (s *Store) ReadStream(ctx context.Context, stream string, dir eventstore.Direction, from int64, limit int) ([]eventstore.RecordedEvent, error) {
	evs, err := s.ReadStreamIn(ctx, s.db, stream, dir, from, limit)
	last := int64(0)
	for _, e := range evs {
		last = max(last, e.Version)
	}
	if last > 0 { // committed: read outside any transaction
		s.heads.saw(stream, last)
	}
	return evs, err
}

// ReadStreamIn reads a stream within q.
func (s *Store) ReadStreamIn(ctx context.Context, q Querier, stream string, dir eventstore.Direction, from int64, limit int) ([]eventstore.RecordedEvent, error) {
	lim := any(nil)
	if limit > 0 {
		lim = limit
	}
	var sql string
	if dir == eventstore.Backwards {
		if from <= 0 {
			from = 1<<63 - 1
		}
		sql = `SELECT ` + selectColumns + ` FROM events WHERE stream_id = $1 AND version <= $2 ORDER BY version DESC LIMIT $3`
	} else {
		sql = `SELECT ` + selectColumns + ` FROM events WHERE stream_id = $1 AND version >= $2 ORDER BY version LIMIT $3`
	}
	rows, err := q.Query(ctx, sql, stream, from, lim)
	if err != nil {
		return nil, fmt.Errorf("read stream %s: %w", stream, err)
	}
	return scanEvents(rows, max(limit, 0))
}

// ReadAll implements eventstore.Store. The pg_snapshot_xmin horizon keeps a
// transaction that commits late from being overtaken by later ones.
func (s *Store) ReadAll(ctx context.Context, after eventstore.Position, limit int) ([]eventstore.RecordedEvent, error) {
	if limit <= 0 {
		limit = 1000
	}
	rows, err := s.db.Query(ctx, `SELECT `+selectColumns+` FROM events
		WHERE (transaction_id, "offset") > ($1::text::xid8, $2) -- a row comparison: an index range, however deep
		  AND transaction_id < pg_snapshot_xmin(pg_current_snapshot())
		ORDER BY events.transaction_id, events."offset" LIMIT $3`, // qualified: a bare name would sort the text column
		strconv.FormatUint(after.Commit, 10), int64(after.Prepare), limit)
	if err != nil {
		return nil, fmt.Errorf("read all: %w", err)
	}
	return scanEvents(rows, limit)
}

// scanEvents reads rows of selectColumns; expected, if known (else 0), is
// the most rows that may come, to size the result once (up to a page of
// maxPresized: a caller's limit may be far above what the log holds).
func scanEvents(rows pgx.Rows, expected int) ([]eventstore.RecordedEvent, error) {
	defer rows.Close()
	out := make([]eventstore.RecordedEvent, 0, min(expected, maxPresized))
	// Scanned into in place, and the other targets made once per read, not
	// per row (passed to Scan, each would be allocated): a replay reads the
	// whole log. The id as bytes, not through uuid.UUID's Scan (which parses
	// text); the metadata as the driver's bytes, decoded at once.
	var (
		id     pgtype.UUID
		txid   string
		offset int64
		meta   pgtype.DriverBytes
	)
	for rows.Next() {
		out = append(out, eventstore.RecordedEvent{})
		e := &out[len(out)-1]
		if err := rows.Scan(&id, &e.StreamID, &e.Version, &txid, &offset, &e.Type, &e.SchemaVersion, &e.Data, &meta, &e.RecordedAt); err != nil {
			return nil, err
		}
		e.ID = id.Bytes
		var err error
		if e.Position, err = position(txid, offset); err != nil {
			return nil, err
		}
		if err := gojson.Unmarshal(meta, &e.Metadata); err != nil { // go-json: see events.Registry.DecodeInto
			return nil, fmt.Errorf("event %s metadata: %w", e.ID, err)
		}
		e.RecordedAt = e.RecordedAt.UTC()
	}
	return out, rows.Err()
}

// maxPresized bounds the events scanEvents makes room for at once.
const maxPresized = 4096

func position(txid string, offset int64) (eventstore.Position, error) {
	c, err := strconv.ParseUint(txid, 10, 64)
	if err != nil {
		return eventstore.Position{}, fmt.Errorf("transaction id %q: %w", txid, err)
	}
	return eventstore.Position{Commit: c, Prepare: uint64(offset)}, nil
}

var _ eventstore.LogEnder = (*Store)(nil)

// LogEnd implements eventstore.LogEnder. It waits until every transaction
// running when it was called has ended, then returns the first transaction id
// not yet assigned then: events committed before the call are before it, and
// a transaction that commits late cannot land before it, even while a long
// transaction holds the pg_snapshot_xmin horizon of ReadAll back.
func (s *Store) LogEnd(ctx context.Context) (eventstore.Position, error) {
	var xmax string
	if err := s.db.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text`).Scan(&xmax); err != nil {
		return eventstore.Position{}, fmt.Errorf("log end: %w", err)
	}
	commit, err := strconv.ParseUint(xmax, 10, 64)
	if err != nil {
		return eventstore.Position{}, fmt.Errorf("log end: transaction id %q: %w", xmax, err)
	}
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		var done bool
		if err := s.db.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot()) >= $1::text::xid8`, xmax).Scan(&done); err != nil {
			return eventstore.Position{}, fmt.Errorf("log end: %w", err)
		}
		if done {
			// Offsets start at 1: no event is at (xmax, 0).
			return eventstore.Position{Commit: commit}, nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return eventstore.Position{}, ctx.Err()
		case <-t.C:
		}
	}
}
