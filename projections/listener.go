// Package projections folds events into the PostgreSQL read models through
// Watermill, one consumer group per projection, and tells waiting requests
// when their writes have been applied.
package projections

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/reconnect"
)

// Listener holds one LISTEN connection per process. It wakes projection
// subscribers when events are committed and keeps every projection's
// committed position, so a request can wait for its own write without polling.
type Listener struct {
	pool   *pgxpool.Pool
	logger *slog.Logger

	mu        sync.Mutex
	wakers    []*waker
	positions map[string]eventstore.Position
	changed   chan struct{}             // closed and replaced whenever positions change
	live      atomic.Bool               // the LISTEN connection is up
	esdb      bool                      // positions are EventStoreDB's (esdb_checkpoints)
	others    map[string]channelHandler // OnNotify's, by channel; set before Run
	listening chan struct{}             // closed once it first listens
	firstLive sync.Once
}

// channelHandler is what OnNotify was given for a channel.
type channelHandler struct {
	notify func(payload string)
	resync func()
}

// OnNotify makes the listener LISTEN on channel too, call notify with each
// notification's payload, and call resync each time it starts listening
// (again): what was sent while it was not was not heard. Call it before
// Run.
func (l *Listener) OnNotify(channel string, notify func(payload string), resync func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.others == nil {
		l.others = map[string]channelHandler{}
	}
	l.others[channel] = channelHandler{notify, resync}
}

// Listening is closed once the listener first listens: every notification
// sent from then on is heard (or, after a lost connection, followed by a
// resync).
func (l *Listener) Listening() <-chan struct{} { return l.listening }

// Live reports whether the LISTEN connection is up.
func (l *Listener) Live() bool { return l.live.Load() }

// FollowESDB makes the listener read the projections' positions from
// esdb_checkpoints only; call it before Run. After `lectern events copy`
// projection_offsets still holds PostgreSQL positions, which do not compare
// with EventStoreDB's: read alongside, a PostgreSQL transaction id would pass
// for a later position and a write would answer before its read models hold
// it. Positions read before the switch are forgotten.
func (l *Listener) FollowESDB() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.esdb {
		l.esdb = true
		clear(l.positions)
	}
}

// NewListener returns a listener; Run starts it.
func NewListener(pool *pgxpool.Pool, logger *slog.Logger) *Listener {
	return &Listener{pool: pool, logger: logger, positions: map[string]eventstore.Position{}, changed: make(chan struct{}),
		listening: make(chan struct{})}
}

// A waker signals one projection's subscriber.
type waker struct {
	group string
	types map[string]bool // the event types it handles
	ch    chan struct{}
	// appended: an append of a type it handles was announced since it last
	// asked (tookAppended); a nudge does not say so.
	appended atomic.Bool
}

// tookAppended reports whether an append was announced since the last call.
func (w *waker) tookAppended() bool { return w.appended.Swap(false) }

func (w *waker) signal() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// wake returns a waker whose channel receives (without blocking the sender)
// after every committed append of one of the given event types (or of types
// not known), a missed signal kept until read, and the function that stops
// it (a restarted projection asks for a new one). WaitFor signals it too
// when it waits for group: the projection then moves its offset past events
// it does not handle, which no append of theirs woke it for.
func (l *Listener) wake(group string, types []string) (*waker, func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := &waker{group: group, types: map[string]bool{}, ch: make(chan struct{}, 1)}
	for _, t := range types {
		w.types[t] = true
	}
	l.wakers = append(l.wakers, w)
	return w, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.wakers = slices.DeleteFunc(l.wakers, func(c *waker) bool { return c == w })
	}
}

// WakeLocal wakes this process's subscribers after an append it made, of
// events of the given types (nil: not known).
func (l *Listener) WakeLocal(types []string) { l.wakeFor(types) }

func (l *Listener) wakeAll() { l.wakeFor(nil) }

// wakeFor wakes the subscribers handling one of types, or all when types is nil.
func (l *Listener) wakeFor(types []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.wakers {
		if types == nil || slices.ContainsFunc(types, func(t string) bool { return w.types[t] }) {
			w.appended.Store(true)
			w.signal()
		}
	}
}

// nudge wakes the subscribers of the given groups.
func (l *Listener) nudge(groups []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.wakers {
		if slices.Contains(groups, w.group) {
			w.signal()
		}
	}
}

// Run listens until ctx ends, reconnecting with backoff when the connection
// drops (the wait starts over once a connection got as far as listening).
func (l *Listener) Run(ctx context.Context) {
	_ = reconnect.Loop(ctx, reconnect.Default, func() (bool, error) {
		err := l.listen(ctx)
		wasLive := l.live.Swap(false)
		return wasLive, err
	}, func(err error, wait time.Duration) {
		l.logger.Warn("notification listener disconnected; reconnecting", "error", err, "in", wait)
	})
}

// ListenerApplicationName names the listener's connection in
// pg_stat_activity.
const ListenerApplicationName = "lectern listener"

func (l *Listener) listen(ctx context.Context) error {
	cfg := l.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = ListenerApplicationName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	l.mu.Lock()
	others := l.others
	l.mu.Unlock()
	channels := []string{postgres.EventsChannel, postgres.PositionsChannel}
	for ch := range others {
		channels = append(channels, ch)
	}
	for _, ch := range channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return err
		}
	}
	for _, h := range others {
		h.resync()
	}
	// Anything committed while we were not listening: catch up.
	if err := l.Refresh(ctx); err != nil {
		return err
	}
	l.live.Store(true)
	l.firstLive.Do(func() { close(l.listening) })
	l.wakeAll()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		switch n.Channel {
		case postgres.EventsChannel:
			l.wakeFor(postgres.EventTypes(n.Payload))
		case postgres.PositionsChannel:
			group, cursor, ok := strings.Cut(n.Payload, " ")
			if pos, err := eventstore.ParsePosition(cursor); ok && err == nil {
				l.advance(group, pos)
			}
		default:
			if h, ok := others[n.Channel]; ok {
				h.notify(n.Payload)
			}
		}
	}
}

func (l *Listener) advance(group string, pos eventstore.Position) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if pos.Compare(l.positions[group]) <= 0 {
		return
	}
	l.positions[group] = pos
	close(l.changed)
	l.changed = make(chan struct{})
}

// Refresh reads every projection's committed position from the database.
func (l *Listener) Refresh(ctx context.Context) error {
	l.mu.Lock()
	sql := `SELECT consumer_group, last_processed_transaction_id::text, coalesce(offset_acked, 0) FROM projection_offsets`
	if l.esdb {
		sql = `SELECT consumer_group, commit_position::text, prepare_position FROM esdb_checkpoints`
	}
	l.mu.Unlock()
	rows, err := l.pool.Query(ctx, sql)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var group, txid string
		var offset int64
		if err := rows.Scan(&group, &txid, &offset); err != nil {
			return err
		}
		if pos, err := eventstore.ParsePosition(txid + "-" + strconv.FormatInt(offset, 10)); err == nil {
			l.advance(group, pos)
		}
	}
	return rows.Err()
}

// Position is a projection's last committed position.
func (l *Listener) Position(group string) eventstore.Position {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.positions[group]
}

// reached reports whether every group has applied pos, and if not the
// groups that have not and the channel that closes on the next change.
func (l *Listener) reached(pos eventstore.Position, groups []string) (bool, []string, <-chan struct{}, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var behind []string
	for _, g := range groups {
		if l.positions[g].Compare(pos) < 0 {
			behind = append(behind, g)
		}
	}
	return behind == nil, behind, l.changed, l.live.Load()
}

// WaitFor blocks until every named projection has applied the event at pos,
// or ctx ends. A lost notification costs at most one fallback interval.
// The projections behind are nudged once: one that handles none of the
// events up to pos was not woken by them.
func (l *Listener) WaitFor(ctx context.Context, pos eventstore.Position, groups ...string) error {
	const fallback = 100 * time.Millisecond
	nudged := false
	for {
		done, behind, changed, live := l.reached(pos, groups)
		if done {
			return nil
		}
		if !nudged {
			l.nudge(behind)
			nudged = true
		}
		if !live {
			if err := l.Refresh(ctx); err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
			if done, _, _, _ = l.reached(pos, groups); done {
				return nil
			}
		}
		timer := time.NewTimer(fallback)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-changed:
			timer.Stop()
		case <-timer.C:
			_ = l.Refresh(ctx)
		}
	}
}
