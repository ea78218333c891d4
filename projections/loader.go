package projections

import (
	"context"
	"fmt"
	"slices"
	"time"

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
	// Types are the event types it folds in place of their handlers (a
	// cross-stream one, an erasure, the handlers apply again once the
	// loaders have handed over: see crossStream).
	Types() []string
	// Tables are the tables it writes: those its types' handlers write.
	Tables() []string
	// Fold applies one event, decoded as its handler would receive it (a
	// pointer to the event), in log order.
	Fold(m events.Meta, e any) error
	// Rows hands over rows to write: while it folds (final false), the rows
	// no later event can change, once enough have gathered (it may return
	// none); at the end (final true: the log is read, or the loaders hold
	// more than the replay's LoadLimit), all the rest. Then it is done.
	Rows(final bool) ([]TableRows, error)
	// Held is the number of rows it holds in memory (see
	// Replayer.LoadLimit).
	Held() int
}

// withLoader gives p a loader, which must fold every event type p's handlers
// apply and write p's tables, all and only: a type left to a handler would
// be applied, during a catch-up, to tables that hold none of the loader's
// rows yet. A mismatch is a programming error, found when p is built.
func withLoader(p Projection, newLoader func() Loader) Projection {
	l := newLoader()
	for _, h := range p.Handlers {
		if typ := (marshaler{}).Name(h.NewEvent()); !slices.Contains(l.Types(), typ) {
			panic(fmt.Sprintf("projection %s: its loader does not fold %s, which its handlers apply (see Loader)", p.Name, typ))
		}
	}
	tables := slices.Sorted(slices.Values(l.Tables()))
	if !slices.Equal(tables, slices.Sorted(slices.Values(p.Tables))) {
		panic(fmt.Sprintf("projection %s: its loader writes %v, its handlers %v", p.Name, tables, p.Tables))
	}
	p.Loaders = append(p.Loaders, newLoader)
	return p
}

// TableRows are rows to COPY into one table.
type TableRows struct {
	Table   string
	Columns []string
	Rows    pgx.CopyFromSource
}

// rowsOf is a COPY source of a row per item, each made when COPY asks for
// it: a loader's last rows are never all in memory at once, beside its state.
func rowsOf[T any](items []T, row func(T) []any) pgx.CopyFromSource {
	i := 0
	return pgx.CopyFromFunc(func() ([]any, error) {
		if i == len(items) {
			return nil, nil
		}
		i++
		return row(items[i-1]), nil
	})
}

// structRows is a COPY source of rows kept as structs, each handing COPY its
// fields by reference: rows made by the hundred thousand are not boxed into
// interfaces a value at a time.
func structRows[T any, P rowFields[T]](rows []T) pgx.CopyFromSource {
	return &structSource[T, P]{rows: rows}
}

// rowFields is a pointer to a row that appends pointers to its fields to v,
// in the order of its table's columns.
type rowFields[T any] interface {
	*T
	fields(v []any) []any
}

type structSource[T any, P rowFields[T]] struct {
	rows   []T
	next   int
	values []any
}

func (s *structSource[T, P]) Next() bool {
	s.next++
	return s.next <= len(s.rows)
}

func (s *structSource[T, P]) Values() ([]any, error) {
	s.values = P(&s.rows[s.next-1]).fields(s.values[:0])
	return s.values, nil
}

func (s *structSource[T, P]) Err() error { return nil }

// copyRows writes rows into the tables of schema (or, when it is "", those
// that unqualified names resolve to).
func copyRows(ctx context.Context, db interface{ Conn() *pgx.Conn }, schema string, tables []TableRows) error {
	for _, t := range tables {
		name := pgx.Identifier{t.Table}
		if schema != "" {
			name = pgx.Identifier{schema, t.Table}
		}
		if err := copyBinary(ctx, db.Conn(), name, t.Columns, t.Rows); err != nil {
			return fmt.Errorf("copy into %s: %w", t.Table, err)
		}
	}
	return nil
}

// rowLoader is a Loader for one table whose rows an event creates (nothing
// when the row is there, as ON CONFLICT (id) DO NOTHING) and other events
// change, each only when it is newer than the row (version < the event's):
// users, agents and few-shot examples. The table's last columns are
// created_at, updated_at and version, after those of R.
type rowLoader[R any] struct {
	table   string
	columns []string      // R's columns
	values  func(R) []any // R's values, in the order of columns
	folds   map[string]func(m events.Meta, e any) error
	rows    map[int64]*loadedRow[R]
	order   []*loadedRow[R] // in the order they were created
	// owner, if set, is the user a row belongs to, and owned the rows by
	// it: what an erasure looks rows up by (ofUser).
	owner func(R) int64
	owned map[int64][]*loadedRow[R]
}

type loadedRow[R any] struct {
	row                  R
	createdAt, updatedAt time.Time
	version              int64
}

func newRowLoader[R any](table string, columns []string, values func(R) []any) *rowLoader[R] {
	return &rowLoader[R]{table: table, columns: columns, values: values,
		folds: map[string]func(events.Meta, any) error{}, rows: map[int64]*loadedRow[R]{}}
}

// foldInto makes l fold events of type T with fold.
func foldInto[R any, T events.Event](l *rowLoader[R], fold func(m events.Meta, e *T)) {
	var zero T
	l.folds[zero.EventType()] = func(m events.Meta, e any) error {
		t, ok := e.(*T)
		if !ok {
			return fmt.Errorf("%s loader: event is %T, not %T", l.table, e, t)
		}
		fold(m, t)
		return nil
	}
}

// create adds the row with key id unless there is one.
func (l *rowLoader[R]) create(m events.Meta, id int64, row R) {
	if _, ok := l.rows[id]; ok {
		return
	}
	r := &loadedRow[R]{row: row, createdAt: m.RecordedAt, updatedAt: m.RecordedAt, version: m.Version}
	l.rows[id] = r
	l.order = append(l.order, r)
	if l.owner != nil {
		o := l.owner(row)
		l.owned[o] = append(l.owned[o], r)
	}
}

// byOwner makes l keep its rows by the user owner says a row belongs to
// (which no event changes), for ofUser.
func (l *rowLoader[R]) byOwner(owner func(R) int64) {
	l.owner, l.owned = owner, map[int64][]*loadedRow[R]{}
}

// ofUser calls f with each row of user (see byOwner) to change, its version
// and time left as they are: an erasure, which is no event of the rows'
// streams (see crossStream).
func (l *rowLoader[R]) ofUser(user int64, f func(*R)) {
	for _, r := range l.owned[user] {
		f(&r.row)
	}
}

// change returns the row with key id to change, moved to m's version and
// time, or nil when there is none older than m.
func (l *rowLoader[R]) change(m events.Meta, id int64) *R {
	r := l.rows[id]
	if r == nil || r.version >= m.Version {
		return nil
	}
	r.updatedAt, r.version = m.RecordedAt, m.Version
	return &r.row
}

func (l *rowLoader[R]) Tables() []string { return []string{l.table} }

func (l *rowLoader[R]) Held() int { return len(l.order) }

func (l *rowLoader[R]) Types() []string {
	types := make([]string, 0, len(l.folds))
	for t := range l.folds {
		types = append(types, t)
	}
	return types
}

func (l *rowLoader[R]) Fold(m events.Meta, e any) error {
	ev, ok := e.(events.Event)
	if !ok {
		return fmt.Errorf("%s loader: %T is not an event", l.table, e)
	}
	fold, ok := l.folds[ev.EventType()]
	if !ok {
		return fmt.Errorf("%s loader: no fold for %s", l.table, ev.EventType())
	}
	return fold(m, e)
}

// Rows hands the rows over once the log is read: any of them may change
// until then.
func (l *rowLoader[R]) Rows(final bool) ([]TableRows, error) {
	if !final {
		return nil, nil
	}
	rows := rowsOf(l.order, func(r *loadedRow[R]) []any {
		return append(l.values(r.row), r.createdAt, r.updatedAt, r.version)
	})
	l.rows, l.order = map[int64]*loadedRow[R]{}, nil
	if l.owner != nil {
		l.owned = map[int64][]*loadedRow[R]{}
	}
	return []TableRows{{Table: l.table, Columns: append(slices.Clone(l.columns), "created_at", "updated_at", "version"), Rows: rows}}, nil
}
