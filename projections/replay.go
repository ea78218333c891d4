package projections

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"lectern/events"
	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/failpoint"
)

// Replayer rebuilds read models from the event log into fresh tables, then
// swaps them in, while the running service keeps serving (and projecting
// into) the old ones:
//
//  1. each projection's tables are created empty, LIKE the live ones, in a
//     schema of its own (replay_<projection>), and the log is applied to them
//     from the start through pipelined batches in large transactions;
//  2. when it has caught up, one transaction locks the projection's live
//     checkpoint (the live consumer waits on it), applies what arrived
//     meanwhile, moves the checkpoint to the replay's position and swaps the
//     tables (ALTER TABLE ... SET SCHEMA). The live consumer then goes on from
//     there on the new tables.
type Replayer struct {
	Pool        *pgxpool.Pool
	Store       eventstore.Store
	Registry    *events.Registry
	Checkpoints Checkpoints
	// Total, if set, counts the events in the log (for progress and ETA).
	Total func(ctx context.Context) (int64, error)
	// Progress, if set, is told the number of log events read so far.
	Progress func(read int64)
	// PageSize is the number of events per read of the log (default 2 000).
	PageSize int
	// TxEvents is the number of events per transaction while catching up
	// (default 2 000). Short, because a running transaction holds back the
	// horizon below which the PostgreSQL log is visible, and with it every
	// live projection (eventstore/postgres).
	TxEvents int
	// Pipeline is the number of statements per pipelined batch (default 1 000).
	Pipeline int
	// LoadLimit is the number of rows a projection's loaders may hold in
	// memory (default 500 000, about 200 MB of heap with the bench's rows):
	// past it, they write what they hold and the handlers apply the rest of
	// the log (see Loader).
	LoadLimit int
	// KeepOld keeps the replaced tables in schema replaced_<projection>
	// instead of dropping them (to compare them, say).
	KeepOld bool

	read atomic.Int64 // log events read while catching up
}

// Checkpoints are where a store's live consumers keep their positions.
type Checkpoints interface {
	// Lock locks a consumer group's checkpoint until tx ends (the live
	// consumer blocks on it) and reads it.
	Lock(ctx context.Context, tx pgx.Tx, group string) (eventstore.Position, error)
	// Save moves the checkpoint and announces it on the positions channel.
	Save(ctx context.Context, tx pgx.Tx, group string, pos eventstore.Position) error
}

// ReplayResult is what a replay of one projection did.
type ReplayResult struct {
	Projection string
	// Applied is the number of events its handlers applied.
	Applied int64
	// Position is where the live consumer goes on from.
	Position eventstore.Position
	Tables   []string
	// CaughtUp is the time its bulk catch-up took (from the replay's start:
	// the log is read once for every projection).
	CaughtUp time.Duration
}

// Replayable reports whether p owns tables a replay can rebuild.
func Replayable(p Projection) bool { return len(p.Tables) > 0 }

// Replay rebuilds the projections' tables (each must be Replayable) and swaps
// them in.
func (r *Replayer) Replay(ctx context.Context, ps ...Projection) ([]ReplayResult, error) {
	start := time.Now()
	r.defaults()
	live, err := r.liveSchema(ctx)
	if err != nil {
		return nil, err
	}
	workers := make([]*replayWorker, len(ps))
	for i, p := range ps {
		if !Replayable(p) {
			return nil, fmt.Errorf("projection %s owns no tables to replay", p.Name)
		}
		w, err := r.newWorker(p, live)
		if err != nil {
			return nil, err
		}
		workers[i] = w
	}
	defer func() {
		for _, w := range workers {
			if w.conn != nil {
				_ = w.conn.Close(context.WithoutCancel(ctx))
			}
		}
	}()
	if err := r.prepare(ctx, workers); err != nil {
		return nil, err
	}
	if err := r.catchUp(ctx, workers, start); err != nil {
		return nil, err
	}
	out := make([]ReplayResult, len(workers))
	g, gctx := errgroup.WithContext(ctx)
	for i, w := range workers {
		g.Go(func() error {
			res, err := r.swap(gctx, w)
			res.CaughtUp = w.caughtUp
			out[i] = res
			return err
		})
	}
	return out, g.Wait()
}

func (r *Replayer) defaults() {
	if r.PageSize <= 0 {
		r.PageSize = 2000
	}
	if r.TxEvents <= 0 {
		r.TxEvents = 2000
	}
	if r.Pipeline <= 0 {
		r.Pipeline = defaultPipeline
	}
	if r.LoadLimit <= 0 {
		r.LoadLimit = 500_000
	}
}

func (r *Replayer) liveSchema(ctx context.Context) (string, error) {
	var s string
	err := r.Pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&s)
	return s, err
}

// replayWorker replays one projection.
type replayWorker struct {
	p        Projection
	live     string // the live tables' schema
	schema   string // the fresh tables' schema
	old      string // where the live tables go when swapped out
	handlers map[string]replayable
	// loading are the projection's loaders by event type, while the
	// catch-up lasts (nil after it: the handlers take over). A type has one,
	// but a cross-stream one (an erasure) every loader that folds it.
	loading  map[string][]Loader
	loaders  []Loader
	loads    map[string]bool     // the tables loaders write
	deferred map[string][]string // by table: the statements that build its indexes
	conn     *pgx.Conn           // resolves unqualified names to the fresh tables
	pos      eventstore.Position // the last event applied (or skipped)
	caughtUp time.Duration
	applied  int64
	// postponed are the cross-stream events the loaders folded, for the
	// handlers to apply once the loaders have handed all their rows over
	// (see crossStream). The applying side's.
	postponed []setItem
}

var projectionName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,40}$`)

func (r *Replayer) newWorker(p Projection, live string) (*replayWorker, error) {
	if !projectionName.MatchString(p.Name) {
		return nil, fmt.Errorf("projection name %q cannot name a schema", p.Name)
	}
	w := &replayWorker{p: p, live: live, schema: "replay_" + p.Name, old: "replaced_" + p.Name, handlers: map[string]replayable{}}
	for _, h := range handlersByType(p.Handlers) {
		rh, ok := h.(replayable)
		if !ok {
			return nil, fmt.Errorf("projection %s: handler %T cannot be replayed (build it with On)", p.Name, h)
		}
		w.handlers[marshaler{}.Name(h.NewEvent())] = rh
	}
	if len(p.Loaders) > 0 {
		w.loading, w.loads = map[string][]Loader{}, map[string]bool{}
	}
	for _, newLoader := range p.Loaders {
		l := newLoader()
		for _, typ := range l.Types() {
			if _, ok := w.handlers[typ]; !ok {
				return nil, fmt.Errorf("projection %s: a loader folds %s, which no handler applies", p.Name, typ)
			}
			if _, dup := w.loading[typ]; dup && !crossStream(typ) {
				return nil, fmt.Errorf("projection %s: two loaders fold %s", p.Name, typ)
			}
			w.loading[typ] = append(w.loading[typ], l)
		}
		for _, t := range l.Tables() {
			if !slices.Contains(p.Tables, t) {
				return nil, fmt.Errorf("projection %s: a loader writes %s, which is not one of its tables", p.Name, t)
			}
			w.loads[t] = true
		}
		w.loaders = append(w.loaders, l)
	}
	return w, nil
}

// prepare creates each projection's empty tables, LIKE the live ones, with
// the live ones' index names (so that later migrations find them).
func (r *Replayer) prepare(ctx context.Context, workers []*replayWorker) error {
	for _, w := range workers {
		sqls := []string{
			"DROP SCHEMA IF EXISTS " + pgx.Identifier{w.schema}.Sanitize() + " CASCADE",
			"DROP SCHEMA IF EXISTS " + pgx.Identifier{w.old}.Sanitize() + " CASCADE",
			"CREATE SCHEMA " + pgx.Identifier{w.schema}.Sanitize(),
		}
		for _, t := range w.p.Tables {
			// Unlogged while handlers write the bulk of the log (SET LOGGED
			// then writes each table to the WAL in one pass, cheaper than row
			// by row); a loader's table is written once, by COPY, which logs
			// it as cheaply.
			persistence := "UNLOGGED "
			if w.loads[t] {
				persistence = ""
			}
			sqls = append(sqls, fmt.Sprintf("CREATE %sTABLE %s (LIKE %s INCLUDING ALL)",
				persistence, pgx.Identifier{w.schema, t}.Sanitize(), pgx.Identifier{w.live, t}.Sanitize()))
		}
		for _, q := range sqls {
			if _, err := r.Pool.Exec(ctx, q); err != nil {
				return fmt.Errorf("replay %s: %w", w.p.Name, err)
			}
		}
		for _, t := range w.p.Tables {
			if err := r.copyIndexNames(ctx, w, t); err != nil {
				return fmt.Errorf("replay %s: %w", w.p.Name, err)
			}
			if w.loads[t] {
				if err := r.deferIndexes(ctx, w, t); err != nil {
					return fmt.Errorf("replay %s: %w", w.p.Name, err)
				}
			}
		}
		if err := r.connect(ctx, w); err != nil {
			return err
		}
	}
	return nil
}

// copyIndexNames renames the fresh table's indexes (and so their
// constraints) to the live table's names, matching them by definition.
func (r *Replayer) copyIndexNames(ctx context.Context, w *replayWorker, table string) error {
	rows, err := r.Pool.Query(ctx, `
		WITH defs AS (
			SELECT i.indrelid, c.relname,
			       i.indisunique::text || regexp_replace(pg_get_indexdef(i.indexrelid), '^.*? USING ', '') AS def
			FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
			WHERE i.indrelid IN ($1::regclass, $2::regclass))
		SELECT DISTINCT ON (n.relname) n.relname, o.relname
		FROM defs n JOIN defs o ON o.def = n.def AND o.indrelid = $1::regclass
		WHERE n.indrelid = $2::regclass
		ORDER BY n.relname, o.relname`,
		pgx.Identifier{w.live, table}.Sanitize(), pgx.Identifier{w.schema, table}.Sanitize())
	names, err := textPairs(rows, err)
	if err != nil {
		return err
	}
	// Through temporary names, so no rename meets a name not yet moved away.
	for i, n := range names {
		tmp := "replay_index_" + strconv.Itoa(i)
		if _, err := r.Pool.Exec(ctx, fmt.Sprintf("ALTER INDEX %s RENAME TO %s",
			pgx.Identifier{w.schema, n[0]}.Sanitize(), pgx.Identifier{tmp}.Sanitize())); err != nil {
			return err
		}
		names[i][0] = tmp
	}
	for _, n := range names {
		if _, err := r.Pool.Exec(ctx, fmt.Sprintf("ALTER INDEX %s RENAME TO %s",
			pgx.Identifier{w.schema, n[0]}.Sanitize(), pgx.Identifier{n[1]}.Sanitize())); err != nil {
			return err
		}
	}
	return nil
}

// deferIndexes drops the indexes of a loader's fresh table, and the
// constraints they back, and keeps the statements that build them again
// once it is loaded: COPY into a table without indexes and one sorted build
// per index is cheaper than growing each index a row at a time. The
// definitions are read after copyIndexNames, so they have the live names.
func (r *Replayer) deferIndexes(ctx context.Context, w *replayWorker, table string) error {
	fresh := pgx.Identifier{w.schema, table}.Sanitize()
	rows, err := r.Pool.Query(ctx, `
		SELECT 'ALTER TABLE ' || $1 || ' DROP CONSTRAINT ' || quote_ident(c.conname),
		       'ALTER TABLE ' || $1 || ' ADD CONSTRAINT ' || quote_ident(c.conname) || ' ' || pg_get_constraintdef(c.oid)
		FROM pg_constraint c WHERE c.conrelid = $1::regclass AND c.contype IN ('p', 'u', 'x') -- backed by an index
		UNION ALL
		SELECT 'DROP INDEX ' || quote_ident($2) || '.' || quote_ident(x.relname), pg_get_indexdef(i.indexrelid)
		FROM pg_index i JOIN pg_class x ON x.oid = i.indexrelid
		WHERE i.indrelid = $1::regclass
		  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conrelid = $1::regclass AND c.conindid = i.indexrelid)`,
		fresh, w.schema)
	defs, err := textPairs(rows, err)
	if err != nil {
		return err
	}
	for _, d := range defs {
		if _, err := r.Pool.Exec(ctx, d[0]); err != nil {
			return err
		}
		if w.deferred == nil {
			w.deferred = map[string][]string{}
		}
		w.deferred[table] = append(w.deferred[table], d[1])
	}
	return nil
}

// textPairs collects the rows of a query of two text columns.
func textPairs(rows pgx.Rows, err error) ([][2]string, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) ([2]string, error) {
		var p [2]string
		return p, row.Scan(&p[0], &p[1])
	})
}

// catchUp reads the log once and feeds every projection's worker, each
// writing through its own connection, until the log is read to its end.
func (r *Replayer) catchUp(ctx context.Context, workers []*replayWorker, start time.Time) error {
	g, gctx := errgroup.WithContext(ctx)
	feeds := make([]chan []eventstore.RecordedEvent, len(workers))
	for i, w := range workers {
		feeds[i] = make(chan []eventstore.RecordedEvent, 4)
		g.Go(func() error {
			err := r.work(gctx, w, feeds[i])
			w.caughtUp = time.Since(start)
			return err
		})
	}
	g.Go(func() error {
		defer func() {
			for _, f := range feeds {
				close(f)
			}
		}()
		var after eventstore.Position
		for {
			page, err := r.Store.ReadAll(gctx, after, r.PageSize)
			if err != nil {
				return err
			}
			for _, f := range feeds {
				select {
				case f <- page:
				case <-gctx.Done():
					return gctx.Err()
				}
			}
			if read := r.read.Add(int64(len(page))); r.Progress != nil {
				r.Progress(read)
			}
			if len(page) < r.PageSize {
				return nil
			}
			after = page[len(page)-1].Position
		}
	})
	return g.Wait()
}

// work applies pages to w's fresh tables in transactions of TxEvents events.
func (r *Replayer) work(ctx context.Context, w *replayWorker, pages <-chan []eventstore.RecordedEvent) error {
	// The next pages are decoded while the database applies this one.
	decoded := make(chan preparedPage, 2)
	stop := make(chan struct{})
	var decodeErr error
	var last []TableRows // the loaders' rows once the log is read
	// The events of the next pages are decoded side by side, each page by
	// a goroutine of its own, ahead of the loaders' folds, which take the
	// pages in order.
	ahead := make(chan *decodingPage, 2)
	quit := make(chan struct{})
	go func() {
		defer close(ahead)
		for page := range pages {
			dp := &decodingPage{page: page, done: make(chan struct{})}
			select {
			case ahead <- dp:
			case <-quit:
				return
			}
			go func() {
				defer close(dp.done)
				dp.evs, dp.err = r.decodeEvents(w, page)
			}()
		}
	}()
	go func() {
		defer close(decoded)
		defer close(quit)
		for dp := range ahead {
			<-dp.done
			if dp.err != nil {
				decodeErr = dp.err
				return
			}
			pp, err := r.decodeWith(w, dp.page, dp.evs)
			if err != nil {
				decodeErr = err
				return
			}
			select {
			case decoded <- pp:
			case <-stop: // the reader stops when this worker returns
				return
			}
		}
		if ctx.Err() != nil { // the log was not read to its end
			return
		}
		// The loaders' last rows, after which the handlers take over.
		last, decodeErr = w.loaderRows(true)
	}()
	err := r.applyPages(ctx, w, decoded)
	close(stop)
	for range decoded { // wait for the decoder
	}
	if err == nil && decodeErr != nil {
		err = fmt.Errorf("replay %s: %w", w.p.Name, decodeErr)
	}
	if err != nil {
		return err
	}
	return r.finish(ctx, w, last)
}

// finish completes w's fresh tables once the log is read, each on a pool
// connection of its own, side by side: it writes the loaders' last rows,
// builds the loaded tables' indexes, makes the other tables logged, and
// gathers statistics.
func (r *Replayer) finish(ctx context.Context, w *replayWorker, last []TableRows) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, t := range w.p.Tables {
		g.Go(func() error {
			conn, err := r.Pool.Acquire(gctx)
			if err != nil {
				return err
			}
			defer conn.Release()
			for _, rows := range last {
				if rows.Table == t {
					if err := copyRows(gctx, conn, w.schema, []TableRows{rows}); err != nil {
						return fmt.Errorf("replay %s: %w", w.p.Name, err)
					}
				}
			}
			for _, q := range w.completion(t) {
				if _, err := conn.Exec(gctx, q); err != nil {
					return fmt.Errorf("replay %s: %w", w.p.Name, err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if len(w.postponed) == 0 {
		return nil
	}
	tx, err := w.conn.Begin(ctx)
	if err != nil {
		return err
	}
	ptx := newPipelineTx(tx, r.Pipeline)
	if err := w.applyPostponed(ctx, ptx); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return fmt.Errorf("replay %s: %w", w.p.Name, err)
	}
	if err := ptx.Commit(ctx); err != nil {
		return fmt.Errorf("replay %s: %w", w.p.Name, err)
	}
	return nil
}

// applyPostponed applies the cross-stream events the loaders folded through
// the handlers, now that the loaders' rows are all in the tables: rows a
// loader handed over before such an event were out of its reach. Applied
// again, the loaders' part changes nothing (see crossStream).
func (w *replayWorker) applyPostponed(ctx context.Context, tx *pipelineTx) error {
	items := w.postponed
	w.postponed = nil
	_, err := applySets(ctx, tx, groupSets(items))
	return err
}

// completion is what completes fresh table t once it is filled: the builds
// of its deferred indexes (a loader's table), SET LOGGED (a handlers' table,
// created unlogged), and its statistics.
func (w *replayWorker) completion(t string) []string {
	table := pgx.Identifier{w.schema, t}.Sanitize()
	qs := slices.Clone(w.deferred[t])
	if !w.loads[t] {
		qs = append(qs, "ALTER TABLE "+table+" SET LOGGED")
	}
	return append(qs, "ANALYZE "+table)
}

// loaderRows is what w's loaders hand over (see Loader.Rows); once final,
// the handlers apply the loaders' event types.
func (w *replayWorker) loaderRows(final bool) ([]TableRows, error) {
	var out []TableRows
	for _, l := range w.loaders {
		rows, err := l.Rows(final)
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	if final {
		w.loading, w.loaders = nil, nil
	}
	return out, nil
}

// applyPages applies decoded pages to w's fresh tables in transactions of
// TxEvents events.
func (r *Replayer) applyPages(ctx context.Context, w *replayWorker, pages <-chan preparedPage) error {
	var tx *pipelineTx
	inTx, commits := 0, 0
	for page := range pages {
		if tx == nil {
			ptx, err := w.conn.Begin(ctx)
			if err != nil {
				return err
			}
			tx = newPipelineTx(ptx, r.Pipeline)
		}
		if err := r.apply(ctx, tx, w, page); err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			return fmt.Errorf("replay %s: %w", w.p.Name, err)
		}
		if inTx += page.read; inTx >= r.TxEvents {
			if err := tx.Commit(ctx); err != nil {
				return fmt.Errorf("replay %s: %w", w.p.Name, err)
			}
			tx, inTx = nil, 0
			if commits++; commits&(commits-1) == 0 && commits <= 64 {
				if err := w.analyze(ctx); err != nil {
					return fmt.Errorf("replay %s: %w", w.p.Name, err)
				}
			}
		}
	}
	if err := ctx.Err(); err != nil {
		if tx != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
		return err
	}
	if tx != nil {
		if err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("replay %s: %w", w.p.Name, err)
		}
	}
	return nil
}

// analyze gathers statistics on w's fresh tables. Without them the planner
// takes a key lookup in a table it has never analysed to match 0.5 % of it,
// and joins a set of events to a whole table by scanning it. Statistics
// taken early stay right as the tables grow (the planner scales them to a
// table's current size), so the catch-up takes them after its 1st, 2nd,
// 4th, ... 64th transaction. Loaders' tables are not read meanwhile.
func (w *replayWorker) analyze(ctx context.Context) error {
	for _, t := range w.p.Tables {
		if w.loads[t] {
			continue
		}
		if _, err := w.conn.Exec(ctx, "ANALYZE "+pgx.Identifier{w.schema, t}.Sanitize()); err != nil {
			return err
		}
	}
	return nil
}

// preparedPage is a page of the log decoded into the sets a replay applies.
type preparedPage struct {
	sets   []eventSet
	copies []TableRows // rows the loaders handed over
	loaded int         // events the loaders folded
	// postponed are the page's cross-stream events the loaders folded, for
	// the handlers once the loaders have handed over (replayWorker.postponed).
	postponed []setItem
	// handover: the loaders handed over all they held, and the handlers
	// apply their events from the next page on.
	handover bool
	read     int                 // log events in the page
	last     eventstore.Position // the page's last event
}

// decode decodes the events of page that w handles, and sorts them into
// sets: events of different streams are applied out of log order, set-wise,
// the first event of each stream in the page, then the second, and so on,
// each such wave one set per event type (one statement for a SetHandler).
// Each stream's events keep their order, and handlers touch only their
// stream's rows (see Handler), so the tables end as a replay in log order
// leaves them.
func (r *Replayer) decode(w *replayWorker, page []eventstore.RecordedEvent) (preparedPage, error) {
	evs, err := r.decodeEvents(w, page)
	if err != nil {
		return preparedPage{read: len(page)}, err
	}
	return r.decodeWith(w, page, evs)
}

// decodingPage is a page whose events a goroutine decodes (decodeEvents)
// until done.
type decodingPage struct {
	page []eventstore.RecordedEvent
	evs  []any
	err  error
	done chan struct{}
}

// decodeEvents decodes the events of page that w handles, as their handlers
// receive them; the others are nil. It reads nothing of w that changes.
func (r *Replayer) decodeEvents(w *replayWorker, page []eventstore.RecordedEvent) ([]any, error) {
	evs := make([]any, len(page))
	for i := range page {
		rec := &page[i]
		h, ok := w.handlers[rec.Type]
		if !ok {
			continue
		}
		e := h.NewEvent()
		if err := r.Registry.DecodeInto(rec.Type, rec.SchemaVersion, rec.Data, e); err != nil {
			return nil, fmt.Errorf("decode %s %s: %w", rec.Type, rec.ID, err)
		}
		evs[i] = e
	}
	return evs, nil
}

// decodeWith is decode of page, whose events decodeEvents decoded into evs.
func (r *Replayer) decodeWith(w *replayWorker, page []eventstore.RecordedEvent, evs []any) (preparedPage, error) {
	pp := preparedPage{read: len(page)}
	if len(page) == 0 {
		return pp, nil
	}
	pp.last = page[len(page)-1].Position
	items := make([]setItem, 0, len(page))
	for i := range page {
		rec := &page[i]
		h, ok := w.handlers[rec.Type]
		if !ok {
			continue
		}
		e := evs[i]
		item := setItem{h: h, typ: rec.Type, stream: rec.StreamID, m: events.MetaOf(*rec), e: e}
		if ls, ok := w.loading[rec.Type]; ok {
			for _, l := range ls {
				if err := l.Fold(item.m, e); err != nil {
					return pp, fmt.Errorf("event %s: %w", rec.ID, err)
				}
			}
			pp.loaded++
			if crossStream(rec.Type) {
				pp.postponed = append(pp.postponed, item)
			}
			continue
		}
		items = append(items, item)
	}
	held := 0
	for _, l := range w.loaders {
		held += l.Held()
	}
	pp.handover = held > r.LoadLimit // the handlers take over from the next page
	copies, err := w.loaderRows(pp.handover)
	if err != nil {
		return pp, err
	}
	pp.copies = copies
	pp.sets = groupSets(items)
	return pp, nil
}

// apply applies a prepared page; events w does not handle only move its
// position.
func (r *Replayer) apply(ctx context.Context, tx *pipelineTx, w *replayWorker, pp preparedPage) error {
	n, err := applySets(ctx, tx, pp.sets)
	w.applied += int64(n)
	if err != nil {
		return err
	}
	if len(pp.copies) > 0 {
		if err := tx.flush(ctx); err != nil {
			return err
		}
		if err := copyRows(ctx, tx.Tx, "", pp.copies); err != nil {
			return err
		}
	}
	w.postponed = append(w.postponed, pp.postponed...)
	if pp.handover { // the handlers need the indexes, and statistics
		if err := tx.flush(ctx); err != nil {
			return err
		}
		for _, t := range w.p.Tables {
			if !w.loads[t] {
				continue
			}
			for _, q := range w.completion(t) {
				if _, err := tx.Tx.Exec(ctx, q); err != nil {
					return err
				}
			}
		}
		w.deferred = nil
		if err := w.applyPostponed(ctx, tx); err != nil {
			return err
		}
	}
	w.applied += int64(pp.loaded)
	if pp.read > 0 {
		w.pos = pp.last
	}
	return nil
}

// connect opens w's own connection, whose unqualified table names resolve to
// the fresh tables. Its commits do not wait for the WAL flush: a crash loses
// the replay, never the live read models.
func (r *Replayer) connect(ctx context.Context, w *replayWorker) error {
	cfg := r.Pool.Config().ConnConfig.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["search_path"] = pgx.Identifier{w.schema}.Sanitize() + ", " + pgx.Identifier{w.live}.Sanitize()
	cfg.RuntimeParams["synchronous_commit"] = "off"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("replay %s: %w", w.p.Name, err)
	}
	w.conn = conn
	return nil
}

// swap catches w up under the live checkpoint's lock and swaps the tables in.
func (r *Replayer) swap(ctx context.Context, w *replayWorker) (ReplayResult, error) {
	res := ReplayResult{Projection: w.p.Name, Tables: w.p.Tables}
	// Catch up without the lock first, so the live consumer waits only for
	// the last page or so.
	if err := r.follow(ctx, w, w.conn); err != nil {
		return res, err
	}
	tx, err := w.conn.Begin(ctx)
	if err != nil {
		return res, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '30s'"); err != nil {
		return res, err
	}
	live, err := r.Checkpoints.Lock(ctx, tx, w.p.Name)
	if err != nil {
		return res, fmt.Errorf("replay %s: lock checkpoint: %w", w.p.Name, err)
	}
	if err := r.follow(ctx, w, tx); err != nil {
		return res, err
	}
	if w.pos.Compare(live) < 0 {
		// The live checkpoint may lie past the last event: EventStoreDB's
		// subscriptions checkpoint at (C, 0), C the next record's position.
		// That is no gap as long as no event follows w.pos.
		next, err := r.Store.ReadAll(ctx, w.pos, 1)
		if err != nil {
			return res, err
		}
		if len(next) > 0 { // cannot be: the log was read to its end
			return res, fmt.Errorf("replay %s: stopped at %s before the live consumer's %s", w.p.Name, w.pos, live)
		}
	}
	if err := r.Checkpoints.Save(ctx, tx, w.p.Name, w.pos); err != nil {
		return res, fmt.Errorf("replay %s: save checkpoint: %w", w.p.Name, err)
	}
	swaps := []string{"CREATE SCHEMA " + pgx.Identifier{w.old}.Sanitize()}
	for _, t := range w.p.Tables {
		swaps = append(swaps,
			fmt.Sprintf("ALTER TABLE %s SET SCHEMA %s", pgx.Identifier{w.live, t}.Sanitize(), pgx.Identifier{w.old}.Sanitize()),
			fmt.Sprintf("ALTER TABLE %s SET SCHEMA %s", pgx.Identifier{w.schema, t}.Sanitize(), pgx.Identifier{w.live}.Sanitize()))
	}
	swaps = append(swaps, "DROP SCHEMA "+pgx.Identifier{w.schema}.Sanitize())
	swaps = append(swaps, w.p.Swapped...)
	for _, q := range swaps {
		if _, err := tx.Exec(ctx, q); err != nil {
			return res, fmt.Errorf("replay %s: swap: %w", w.p.Name, err)
		}
	}
	failpoint.Reach(failpoint.ReplaySwapping)
	if err := tx.Commit(ctx); err != nil {
		return res, fmt.Errorf("replay %s: swap: %w", w.p.Name, err)
	}
	res.Applied, res.Position = w.applied, w.pos
	if !r.KeepOld {
		if _, err := w.conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{w.old}.Sanitize()+" CASCADE"); err != nil {
			return res, fmt.Errorf("replay %s: drop the replaced tables: %w", w.p.Name, err)
		}
	}
	return res, nil
}

// follow applies the log past w's position through db, a page per
// transaction of its own (a savepoint when db is a transaction), until a
// page comes back short: the end of the log as it reads then.
func (r *Replayer) follow(ctx context.Context, w *replayWorker, db interface {
	Begin(context.Context) (pgx.Tx, error)
}) error {
	for {
		page, err := r.Store.ReadAll(ctx, w.pos, r.PageSize)
		if err != nil || len(page) == 0 {
			return err
		}
		ptx, err := db.Begin(ctx)
		if err != nil {
			return err
		}
		tx := newPipelineTx(ptx, r.Pipeline)
		pp, err := r.decode(w, page)
		if err == nil {
			err = r.apply(ctx, tx, w, pp)
		}
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			return fmt.Errorf("replay %s: %w", w.p.Name, err)
		}
		if err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("replay %s: %w", w.p.Name, err)
		}
		if len(page) < r.PageSize {
			return nil
		}
	}
}

// PostgresCheckpoints are the live consumers' offsets on the PostgreSQL
// event store (projection_offsets, watermill-sql's offsets table; its
// subscriber takes the group's advisory lock at the start of every batch,
// postgres.LockOffset).
type PostgresCheckpoints struct{}

// Lock implements Checkpoints; a group without a row gets one at the start.
func (PostgresCheckpoints) Lock(ctx context.Context, tx pgx.Tx, group string) (eventstore.Position, error) {
	if err := postgres.LockOffset(ctx, tx, group); err != nil {
		return eventstore.Position{}, err
	}
	var txid string
	var offset int64
	err := tx.QueryRow(ctx, `
		INSERT INTO projection_offsets (consumer_group, offset_acked, last_processed_transaction_id) VALUES ($1, 0, '0')
		ON CONFLICT (consumer_group) DO UPDATE SET consumer_group = excluded.consumer_group
		RETURNING last_processed_transaction_id::text, coalesce(offset_acked, 0)`, group).Scan(&txid, &offset)
	if err != nil {
		return eventstore.Position{}, err
	}
	return eventstore.ParsePosition(txid + "-" + strconv.FormatInt(offset, 10))
}

// Save implements Checkpoints.
func (PostgresCheckpoints) Save(ctx context.Context, tx pgx.Tx, group string, pos eventstore.Position) error {
	_, err := tx.Exec(ctx, `
		UPDATE projection_offsets SET last_processed_transaction_id = $2::text::xid8, offset_acked = $3
		WHERE consumer_group = $1`, group, strconv.FormatUint(pos.Commit, 10), int64(pos.Prepare))
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, postgres.PositionsChannel, group+" "+pos.String())
	return err
}

// ESDBCheckpoints are the live consumers' checkpoints on EventStoreDB
// (esdb_checkpoints, whose row ESDBSubscriber locks at the start of every
// batch).
type ESDBCheckpoints struct{}

// Lock implements Checkpoints; a group without a row reads as the start.
func (ESDBCheckpoints) Lock(ctx context.Context, tx pgx.Tx, group string) (eventstore.Position, error) {
	var commit, prepare int64
	err := tx.QueryRow(ctx, `SELECT commit_position, prepare_position FROM esdb_checkpoints
		WHERE consumer_group = $1 FOR UPDATE`, group).Scan(&commit, &prepare)
	if errors.Is(err, pgx.ErrNoRows) {
		return eventstore.Position{}, nil
	}
	return eventstore.Position{Commit: uint64(commit), Prepare: uint64(prepare)}, err
}

// Save implements Checkpoints.
func (ESDBCheckpoints) Save(ctx context.Context, tx pgx.Tx, group string, pos eventstore.Position) error {
	_, err := tx.Exec(ctx, `
		INSERT INTO esdb_checkpoints (consumer_group, commit_position, prepare_position) VALUES ($1, $2, $3)
		ON CONFLICT (consumer_group) DO UPDATE SET
			commit_position = excluded.commit_position, prepare_position = excluded.prepare_position`,
		group, int64(pos.Commit), int64(pos.Prepare))
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, postgres.PositionsChannel, group+" "+pos.String())
	return err
}
