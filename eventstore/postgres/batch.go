package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"lectern/eventstore"
)

// Group commit of concurrent single-event appends.
//
// An append of one event at an exact version (or to a new stream), the
// common case of a command, goes through a queue. An append that finds no
// statement in flight is sent at once, alone, with a single-row statement.
// Appends that find one in flight wait: the next to finish sends every
// append waiting by then as one batch, one multi-row statement (one round
// trip, one transaction and one commit for all of them). Another statement
// goes out meanwhile, while fewer than maxInFlight are in flight, only once
// enough appends wait: at least minBatch, or half as many as are made at once
// (of late) if that is fewer, and at least as many as the statements in
// flight carry on average. A statement costs the database about what a few
// rows cost, so concurrent statements of a row or two each would cost more
// than they overlap; two writers still overlap their lone appends; and the
// batches in flight stay about even instead of one big batch and a trickle of
// small ones. A lone writer therefore appends as without the queue, a few
// concurrent writers take turns in batches of a few rows, and many share the
// fixed cost of a statement and a commit among dozens.
//
// Each append of a batch keeps its own outcome. Its row carries its own
// expected-version check. A row that fails its check is not written and its
// append is answered as a lone append that wrote nothing is (idempotent: a
// retry of an event already in the stream succeeds, anything else is a wrong
// expected version). When the statement fails as a whole (a version taken by
// a concurrent writer, an invalid payload) every append of the batch is run
// again alone, which gives each its own answer. A batch never holds two
// appends to the same stream (the second waits for the next batch: its check
// must see the first), and its rows are inserted in stream order, so that two
// batches contending for the same keys take them in the same order. A batch
// is one transaction: its events share a transaction id and are ordered by
// offset, as the events of one multi-event append are, under the same
// pg_snapshot_xmin horizon.
//
// Once sent, an append is answered even if its caller's context ends
// meanwhile (a batch runs for several callers, on a context of its own);
// an append whose caller gave up before it was sent is not sent.

// maxInFlight is how many statements the queue runs at once.
const maxInFlight = 4

// minBatch is the fewest waiting appends sent while another statement is
// in flight, unless fewer writers append at once (see dueLocked).
const minBatch = 4

// maxBatch bounds a batch's rows (a power of two: see batchSQL).
const maxBatch = 128

// batchTimeout bounds a batch's statement: it runs for several callers, so
// on no caller's context.
const batchTimeout = 30 * time.Second

type pendingAppend struct {
	ctx    context.Context
	stream string
	exact  int64 // expected version; 0: no stream
	id     string
	data   []byte // the event's own bytes: sent as they are, not copied into a string
	meta   []byte
	typ    string
	sv     int32
	rec    time.Time
	ev     eventstore.EventData
	done   chan appendOutcome
}

type appendOutcome struct {
	res eventstore.AppendResult
	err error
}

// The expected-version check of an append at version v > 0 is that the
// stream's event v exists (so that no gap can open; a taken version v+1
// fails the insert). A stream's versions have no gaps and events are never
// deleted, so once this store has seen event v committed the check can only
// pass: heads remembers, per stream, the last version the store appended or
// read, and appends at a known version skip the check. A version remembered
// is never wrong, however old (a concurrent writer may have appended since:
// the insert then collides as it would have).
type heads struct {
	mu sync.Mutex
	m  map[string]int64
}

// maxHeads bounds the streams remembered; when full, heads starts afresh.
const maxHeads = 8192

// saw records that stream's event v is committed.
func (h *heads) saw(stream string, v int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil || len(h.m) >= maxHeads {
		h.m = make(map[string]int64)
	}
	if v > h.m[stream] {
		h.m[stream] = v
	}
}

// checks reports, for each append, whether its expected version needs
// checking.
func (h *heads) checks(live []*pendingAppend) []bool {
	chk := make([]bool, len(live))
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, p := range live {
		chk[i] = p.exact != 0 && !(p.exact > 0 && p.exact <= h.m[p.stream])
	}
	return chk
}

// appendOneSQL appends one event at exact version $2, if event $2 of the
// stream exists; appendOneUncheckedSQL appends one at a version whose
// predecessor needs no check (none, or known to exist). Both take a batch
// row's parameters but its check flag.
const (
	appendOneSQL = `
INSERT INTO events (uuid, payload, metadata, stream_id, version, event_type, schema_version, recorded_at)
SELECT $3::uuid, $4::json, $5::json, $1::text, $2::bigint + 1, $6::text, $7::int, $8::timestamptz
WHERE EXISTS (SELECT 1 FROM events WHERE stream_id = $1::text AND version = $2::bigint)
RETURNING stream_id, version, transaction_id, "offset"`
	appendOneUncheckedSQL = `
INSERT INTO events (uuid, payload, metadata, stream_id, version, event_type, schema_version, recorded_at)
VALUES ($3::uuid, $4::json, $5::json, $1::text, $2::bigint + 1, $6::text, $7::int, $8::timestamptz)
RETURNING stream_id, version, transaction_id, "offset"`
)

// LoneAppendSQL is the statement a lone append sends at a version whose
// predecessor needs no check, as the bench measures it by itself: its
// parameters are stream, expected version, event id, data, metadata,
// type, schema version and recorded time.
const LoneAppendSQL = appendOneUncheckedSQL

// batchSQL holds the statements of batches: batchSQL[k] inserts up to 1<<k
// rows (k >= 1; a lone append has the statements above). A batch is padded to the next size with rows of NULLs, which
// its WHERE leaves out, so that a few statements serve every batch: each is
// prepared once per connection and, after the server's first few custom
// plans, runs on its cached generic plan. (An unnest of array parameters is
// planned again at every execution: its custom plans, which see the arrays'
// lengths, always look cheaper than the generic one, and planning such an
// INSERT costs more than running it.) The check is a scalar subquery, not an
// EXISTS: the planner may turn an EXISTS over several rows into a hashed
// subplan that reads the whole events table, and does when the plan is made
// while the table is small (a generic plan is then kept as the table grows).
var batchSQL = func() []string {
	sqls := []string{""}
	for n := 2; n <= maxBatch; n *= 2 {
		sqls = append(sqls, batchAppendSQL(n))
	}
	return sqls
}()

// batchColumns is the number of parameters of a batch's row: stream,
// expected version, whether to check it, then the event's columns.
const batchColumns = 9

// batchAppendSQL is the statement of n rows, inserted in the order of the
// rows.
func batchAppendSQL(n int) string {
	var b strings.Builder
	b.WriteString(`
INSERT INTO events (uuid, payload, metadata, stream_id, version, event_type, schema_version, recorded_at)
SELECT x.id, x.data, x.meta, x.stream, x.exp + 1, x.typ, x.sv, x.rec
FROM (VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		o := batchColumns * i
		fmt.Fprintf(&b, "($%d::text, $%d::bigint, $%d::bool, $%d::uuid, $%d::json, $%d::json, $%d::text, $%d::int, $%d::timestamptz, %d)",
			o+1, o+2, o+3, o+4, o+5, o+6, o+7, o+8, o+9, i)
	}
	// A padding row's check is NULL, and so is its WHERE.
	b.WriteString(`) AS x(stream, exp, chk, id, data, meta, typ, sv, rec, n)
WHERE NOT x.chk OR (SELECT true FROM events e WHERE e.stream_id = x.stream AND e.version = x.exp)
ORDER BY x.n
RETURNING stream_id, version, transaction_id, "offset"`)
	return b.String()
}

// appendGrouped appends one event at an exact version through the queue.
func (s *Store) appendGrouped(ctx context.Context, stream string, exact int64, e eventstore.EventData) (eventstore.AppendResult, error) {
	p, err := s.newPending(ctx, stream, exact, e)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	s.batchMu.Lock()
	s.writers.saw(s.inFlight + len(s.queue) + 1)
	if s.flushing == 0 && len(s.queue) == 0 {
		// Alone: the append is its own batch.
		s.flushing++
		s.inFlight++
		s.batchMu.Unlock()
		s.flushBatch([]*pendingAppend{p})
	} else {
		s.queue = append(s.queue, p)
		lead := s.dueLocked()
		if lead {
			s.flushing++
		}
		s.batchMu.Unlock()
		if lead {
			s.flush()
		}
	}
	out := <-p.done
	return out.res, out.err
}

// newPending is the queue's request to append e at version exact.
func (s *Store) newPending(ctx context.Context, stream string, exact int64, e eventstore.EventData) (*pendingAppend, error) {
	row, err := s.encodeOne(e)
	if err != nil {
		return nil, err
	}
	if row.size > eventstore.MaxAppendBytes {
		return nil, &eventstore.AppendTooLargeError{Size: row.size}
	}
	return &pendingAppend{ctx: ctx, stream: stream, exact: exact, id: row.id, data: row.data, meta: row.meta, typ: e.Type,
		sv: row.sv, rec: row.rec, ev: e, done: make(chan appendOutcome, 1)}, nil
}

// dueLocked reports whether a statement should be sent now for the appends
// waiting (see the top of this file).
func (s *Store) dueLocked() bool {
	switch {
	case len(s.queue) == 0:
		return false
	case s.flushing == 0:
		return true
	case s.flushing >= maxInFlight:
		return false
	}
	need := min(minBatch, (s.writers.get()+1)/2) // half, rounded up
	return len(s.queue) >= max(need, s.inFlight/s.flushing)
}

// flush sends one batch from the queue and answers it, on the flushing slot
// its caller took.
func (s *Store) flush() {
	s.batchMu.Lock()
	if len(s.queue) == 0 { // another flusher took it
		s.flushing--
		s.batchMu.Unlock()
		return
	}
	var batch []*pendingAppend
	seen := make(map[string]bool, len(s.queue))
	rest := s.queue[:0]
	for _, p := range s.queue {
		if len(batch) < maxBatch && !seen[p.stream] {
			seen[p.stream] = true
			batch = append(batch, p)
		} else {
			rest = append(rest, p)
		}
	}
	clear(s.queue[len(rest):])
	s.queue = rest
	s.inFlight += len(batch)
	s.batchMu.Unlock()
	s.flushBatch(batch)
}

// flushBatch runs batch and answers its appends, on the flushing slot its
// caller took. Once the batch has committed, the slot is handed on (to a new
// flusher if appends wait and are due) before the batch's appends are
// answered: the database gets the next batch without waiting for the
// answers, and the caller that led returns with its own answer instead of
// serving everyone after it. Only a batch that failed as a whole hands the
// slot on after its appends ran again alone, so that an append waiting
// behind one of them sees it.
func (s *Store) flushBatch(batch []*pendingAppend) {
	b := s.prepare(batch)
	if b == nil {
		s.handOn(len(batch))
		return
	}
	written, err := b.run(s)
	s.settle(b, written, err)
	if err != nil {
		s.answer(b, written, err)
		s.handOn(len(batch))
		return
	}
	s.handOn(len(batch))
	s.answer(b, written, nil)
}

// concurrency estimates how many appends are made at once: the most found
// waiting or in flight (with the new one) over the last few hundred appends.
// (Appends whose writers are between two appends are not in the queue: the
// count at any one moment would say fewer.)
type concurrency struct {
	cur, prev int // the most seen in this window and in the last
	n         int // appends seen in this window
}

const concurrencyWindow = 256

func (c *concurrency) saw(n int) {
	c.cur = max(c.cur, n)
	if c.n++; c.n == concurrencyWindow {
		c.prev, c.cur, c.n = c.cur, 0, 0
	}
}

func (c *concurrency) get() int { return max(c.cur, c.prev) }

// handOn gives up the caller's slot, whose statement carried n appends, and
// starts a new flusher if appends wait and are due.
func (s *Store) handOn(n int) {
	s.batchMu.Lock()
	s.flushing--
	s.inFlight -= n
	more := s.dueLocked()
	if more {
		s.flushing++
	}
	s.batchMu.Unlock()
	if more {
		go s.flush()
	}
}

// runBatch runs batch and answers its appends, outside the queue.
func (s *Store) runBatch(batch []*pendingAppend) {
	if b := s.prepare(batch); b != nil {
		written, err := b.run(s)
		s.settle(b, written, err)
		s.answer(b, written, err)
	}
}

// A batchStatement is a batch's statement, ready to run.
type batchStatement struct {
	live    []*pendingAppend // in stream order
	types   []string         // their event types
	ctx     context.Context  // nil: a context of its own
	sql     string
	args    []any
	notify  bool   // a NOTIFY follows the statement in its transaction
	payload string // the NOTIFY's
	commits int64  // commits recorded when it was sent (see carry)
}

// prepare builds the statement of batch's appends, with a NOTIFY in its
// transaction if one is due. Appends whose callers gave up are answered and
// left out; with none left it returns nil.
func (s *Store) prepare(batch []*pendingAppend) *batchStatement {
	live := make([]*pendingAppend, 0, len(batch))
	for _, p := range batch {
		if err := p.ctx.Err(); err != nil {
			p.done <- appendOutcome{err: err}
			continue
		}
		live = append(live, p)
	}
	if len(live) == 0 {
		return nil
	}
	b := &batchStatement{live: live}
	if len(live) == 1 {
		// A lone append runs on its caller's context.
		p := live[0]
		b.ctx, b.sql = p.ctx, appendOneUncheckedSQL
		if s.heads.checks(live)[0] {
			b.sql = appendOneSQL
		}
		b.args = []any{p.stream, p.exact, p.id, p.data, p.meta, p.typ, p.sv, p.rec}
	} else {
		s.batches.Add(1)
		sort.Slice(live, func(i, j int) bool { return live[i].stream < live[j].stream })
		chk := s.heads.checks(live)
		k := bits.Len(uint(len(live) - 1)) // the smallest k with 1<<k >= len(live)
		b.sql = batchSQL[k]
		b.args = make([]any, batchColumns<<k) // padding rows stay NULL
		for i, p := range live {
			a := b.args[batchColumns*i:]
			a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8] = p.stream, p.exact, chk[i], p.id, p.data, p.meta, p.typ, p.sv, p.rec
		}
	}
	b.types = make([]string, len(live))
	for i, p := range live {
		b.types[i] = p.typ
	}
	b.notify, b.payload, b.commits = s.carry(b.types)
	return b
}

// run runs b and returns each written stream's result, or the error that
// failed the statement (or its NOTIFY, or their commit) as a whole.
func (b *batchStatement) run(s *Store) (map[string]eventstore.AppendResult, error) {
	ctx := b.ctx
	if ctx == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), batchTimeout)
		defer cancel()
	}
	if !b.notify {
		rows, err := s.db.Query(ctx, b.sql, b.args...)
		return scanBatch(rows, err, len(b.live))
	}
	// One round trip, one implicit transaction: the statement and the NOTIFY.
	q := &pgx.Batch{}
	q.Queue(b.sql, b.args...)
	q.Queue(notifySQL, b.payload)
	br := s.db.SendBatch(ctx, q)
	rows, err := br.Query()
	written, err := scanBatch(rows, err, len(b.live))
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return written, nil
}

// scanBatch reads a batch statement's rows.
func scanBatch(rows pgx.Rows, err error, n int) (map[string]eventstore.AppendResult, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	written := make(map[string]eventstore.AppendResult, n)
	for rows.Next() {
		var stream string
		var version int64
		var txid, offset uint64
		if err := rows.Scan(&stream, &version, &txid, &offset); err != nil {
			return nil, err
		}
		written[stream] = eventstore.AppendResult{Version: version, Position: eventstore.Position{Commit: txid, Prepare: offset}}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(written) > n {
		return nil, errors.New("append batch: more rows than appends")
	}
	return written, nil
}

// settle records how b's commit is announced: by its own NOTIFY, or later.
func (s *Store) settle(b *batchStatement, written map[string]eventstore.AppendResult, err error) {
	switch {
	case err != nil: // nothing committed
	case b.notify:
		s.announced(b.commits)
	case len(written) > 0:
		s.unannounced(b.types)
	}
}

// answer gives each append of b its outcome.
func (s *Store) answer(b *batchStatement, written map[string]eventstore.AppendResult, err error) {
	if err != nil && len(b.live) == 1 {
		p := b.live[0]
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			// A concurrent writer took the version (perhaps with this very event).
			res, err := s.idempotent(p.ctx, p.stream, eventstore.Exact(p.exact), []string{p.id})
			p.done <- appendOutcome{res, err}
			return
		}
		p.done <- appendOutcome{err: fmt.Errorf("append to %s: %w", p.stream, err)}
		return
	}
	if err != nil {
		// Each append alone gets its own error (or succeeds).
		for _, p := range b.live {
			res, err := s.AppendIn(p.ctx, s.db, p.stream, eventstore.Exact(p.exact), []eventstore.EventData{p.ev})
			if err == nil {
				s.heads.saw(p.stream, res.Version)
				s.unannounced([]string{p.typ})
			}
			p.done <- appendOutcome{res, err}
		}
		return
	}
	for _, p := range b.live {
		if res, ok := written[p.stream]; ok {
			s.heads.saw(p.stream, res.Version)
			p.done <- appendOutcome{res: res}
			continue
		}
		res, err := s.idempotent(p.ctx, p.stream, eventstore.Exact(p.exact), []string{p.id})
		p.done <- appendOutcome{res, err}
	}
}
