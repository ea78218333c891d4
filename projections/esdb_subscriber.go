package projections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	client "github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/cenkalti/backoff/v5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/eventstore"
	"lectern/eventstore/esdb"
	"lectern/eventstore/postgres"
	"lectern/reconnect"
)

// Subscriptions opens subscriptions to $all: esdb.Store, which rebuilds its
// client when the server was unreachable for long enough that the client gave
// up, so that a resubscription after an outage succeeds.
type Subscriptions interface {
	SubscribeToAll(ctx context.Context, opts client.SubscribeToAllOptions) (*client.Subscription, error)
	// DroppedError classifies the error a subscription dropped with (the
	// client's, raw), as SubscribeToAll's errors are: the server confirms a
	// subscription from a position it cannot read from, then drops it.
	DroppedError(err error) error
	// PastEnd reports whether a position is past the end of the log (a
	// checkpoint of a log since recreated, or restored from an older backup).
	PastEnd(ctx context.Context, p eventstore.Position) (bool, error)
}

// ESDBSubscriberConfig configures an ESDBSubscriber.
type ESDBSubscriberConfig struct {
	// Store opens the subscriptions (an *esdb.Store).
	Store Subscriptions
	// Pool holds the projection's read models and esdb_checkpoints.
	Pool *pgxpool.Pool
	// ConsumerGroup names the projection; it keys its checkpoint row.
	ConsumerGroup string
	// Listener, if set, learns every committed checkpoint at once (the
	// pg_notify reaches it and other processes too, a little later).
	Listener *Listener
	// Logger; nil: slog.Default().
	Logger *slog.Logger
	// BatchSize is the most events applied in one transaction (default 100).
	// A batch holds only the events already received, so a lone event is
	// committed at once.
	BatchSize int
	// ResendInterval is the wait before a nacked batch is delivered again
	// (default 50 ms).
	ResendInterval time.Duration
	// MinBackoff and MaxBackoff bound the wait before resubscribing after
	// the subscription drops (default 100 ms doubling up to 5 s).
	MinBackoff, MaxBackoff time.Duration
}

// ESDBSubscriber is a Watermill subscriber over EventStoreDB's $all, for one
// projection: a catch-up subscription (never a persistent one) with the
// server-side filter excluding system event types ("$..."), started after the
// checkpoint kept in PostgreSQL's esdb_checkpoints.
//
// Each message's context carries a PostgreSQL transaction (see ContextWithTx)
// shared by a batch of events: once every message of the batch is acked, the
// checkpoint is upserted and announced (pg_notify on postgres.PositionsChannel)
// in that transaction, and it commits, so the projection's rows and its
// checkpoint commit together. A nack rolls the whole batch back and delivers
// it again after ResendInterval. Checkpoints the server sends while searching
// past filtered-out events advance the stored checkpoint too. When the
// subscription drops, it resubscribes with backoff from the stored checkpoint.
//
// Messages carry the metadata of postgres.Schema's messages (event_type,
// schema_version, stream_id, version, position, recorded_at, metadata), with
// EventStoreDB's commit and prepare positions as the position.
//
// Close waits for the message in flight to be acked or nacked (a handler may
// still be writing through the transaction), then rolls back what is not
// committed.
type ESDBSubscriber struct {
	cfg    ESDBSubscriberConfig
	logger *slog.Logger

	mu         sync.Mutex
	subscribed bool
	closing    chan struct{}
	closeOnce  sync.Once
	wg         sync.WaitGroup

	last eventstore.Position // the committed checkpoint (run's goroutine only)

	fatal func(error) // set by OnFatal before Subscribe
}

// OnFatal sets what the subscriber calls when it cannot go on: its
// checkpoint is no position of the server's log (one copied from the other
// store, say), refused or confirmed and then dropped, which no
// resubscription would change.
func (s *ESDBSubscriber) OnFatal(f func(error)) { s.fatal = f }

var _ message.Subscriber = (*ESDBSubscriber)(nil)

// NewESDBSubscriber returns a subscriber; Subscribe starts it.
func NewESDBSubscriber(cfg ESDBSubscriberConfig) (*ESDBSubscriber, error) {
	if cfg.Store == nil || cfg.Pool == nil || cfg.ConsumerGroup == "" {
		return nil, errors.New("projections: an EventStoreDB subscriber needs a store, a pool and a consumer group")
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 100
	}
	if cfg.ResendInterval <= 0 {
		cfg.ResendInterval = 50 * time.Millisecond
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(5*time.Second, cfg.MinBackoff)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if cfg.Listener != nil {
		cfg.Listener.FollowESDB()
	}
	return &ESDBSubscriber{cfg: cfg, logger: logger.With("projection", cfg.ConsumerGroup), closing: make(chan struct{})}, nil
}

// ESDBSubscribers returns a constructor of one ESDBSubscriber per consumer
// group, for the runner.
func ESDBSubscribers(store Subscriptions, pool *pgxpool.Pool, listener *Listener, logger *slog.Logger) func(group string) (message.Subscriber, error) {
	return func(group string) (message.Subscriber, error) {
		return NewESDBSubscriber(ESDBSubscriberConfig{Store: store, Pool: pool, ConsumerGroup: group, Listener: listener, Logger: logger})
	}
}

// Subscribe starts delivering events; the topic is ignored ($all is the one
// topic). It may be called once. Ending ctx stops delivery as Close does.
func (s *ESDBSubscriber) Subscribe(ctx context.Context, _ string) (<-chan *message.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.closing:
		return nil, errors.New("projections: subscriber closed")
	default:
	}
	if s.subscribed {
		return nil, errors.New("projections: an EventStoreDB subscriber subscribes once")
	}
	s.subscribed = true
	out := make(chan *message.Message)
	base := context.WithoutCancel(ctx)
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		select {
		case <-ctx.Done():
			s.stop()
		case <-s.closing:
		}
	}()
	go func() {
		defer s.wg.Done()
		defer close(out)
		s.run(base, out)
	}()
	return out, nil
}

// Close stops delivery, waits for the message in flight, and returns.
func (s *ESDBSubscriber) Close() error {
	s.stop()
	s.wg.Wait()
	return nil
}

func (s *ESDBSubscriber) stop() { s.closeOnce.Do(func() { close(s.closing) }) }

func (s *ESDBSubscriber) closed() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// errClosing ends delivery on Close.
var errClosing = errors.New("projections: subscriber closing")

// errPastEnd: the stored checkpoint is past the end of the server's log.
var errPastEnd = errors.New("checkpoint past the end of the log")

// errNacked means a handler refused a message of the batch.
var errNacked = errors.New("projections: message nacked")

// run subscribes from the stored checkpoint, and again with backoff whenever
// the subscription drops or the database fails, until Close.
func (s *ESDBSubscriber) run(ctx context.Context, out chan<- *message.Message) {
	// The waits end on Close; consume runs on ctx, which Close does not
	// cancel (the message in flight is acked or nacked first).
	waits, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.closing:
			cancel()
		case <-waits.Done():
		}
	}()
	err := reconnect.Loop(waits, reconnect.Backoff{Min: s.cfg.MinBackoff, Max: s.cfg.MaxBackoff}, func() (bool, error) {
		progressed, err := s.consume(ctx, out)
		switch {
		case errors.Is(err, errClosing) || s.closed():
			return progressed, backoff.Permanent(errClosing)
		case errors.Is(err, eventstore.ErrInvalidPosition):
			return progressed, backoff.Permanent(fmt.Errorf("the stored checkpoint is not a position of this EventStoreDB log (was it copied from another store? `lectern replay` rebuilds the read model): %w", err))
		case errors.Is(err, errPastEnd):
			return progressed, backoff.Permanent(fmt.Errorf("the stored checkpoint is past the end of this EventStoreDB log: was the store recreated, or restored from a backup older than PostgreSQL's? The projection would pass over every event until the log grew past it; `lectern replay` rebuilds the read model: %w", err))
		}
		return progressed, err
	}, func(err error, wait time.Duration) {
		s.logger.Warn("EventStoreDB subscription dropped; resubscribing from the checkpoint", "error", err, "in", wait)
	})
	if err != nil && !errors.Is(err, errClosing) {
		s.logger.Error("EventStoreDB subscription refused", "error", err)
		if s.fatal != nil {
			s.fatal(err)
		}
	}
}

// LoadESDBCheckpoint reads a consumer group's stored checkpoint (zero: none).
func LoadESDBCheckpoint(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, group string) (eventstore.Position, error) {
	var commit, prepare int64
	err := q.QueryRow(ctx, `SELECT commit_position, prepare_position FROM esdb_checkpoints WHERE consumer_group = $1`, group).Scan(&commit, &prepare)
	if errors.Is(err, pgx.ErrNoRows) {
		return eventstore.Position{}, nil
	}
	if err != nil {
		return eventstore.Position{}, fmt.Errorf("esdb checkpoint of %s: %w", group, err)
	}
	return eventstore.Position{Commit: uint64(commit), Prepare: uint64(prepare)}, nil
}

// consume runs one subscription until it drops, the database fails, or Close.
// progressed reports whether a checkpoint was committed.
func (s *ESDBSubscriber) consume(ctx context.Context, out chan<- *message.Message) (progressed bool, err error) {
	from, err := LoadESDBCheckpoint(ctx, s.cfg.Pool, s.cfg.ConsumerGroup)
	if err != nil {
		return false, err
	}
	s.last = from
	// Only system events are filtered out: collect waits for the rest of an
	// append, so a filter that passed over some of an append's events would
	// stall it.
	opts := client.SubscribeToAllOptions{From: client.Start{}, Filter: client.ExcludeSystemEventsFilter()}
	if !from.IsZero() {
		// The server would take the subscription and wait, silently. A check
		// that fails is passed over: the subscription then meets the same
		// trouble, and reports it.
		if past, err := s.cfg.Store.PastEnd(ctx, from); err == nil && past {
			return false, fmt.Errorf("%w: %v", errPastEnd, from)
		} else if err != nil {
			s.logger.Debug("EventStoreDB checkpoint not checked against the log's end", "error", err)
		}
		opts.From = esdb.ClientPosition(from)
	}
	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub, err := s.cfg.Store.SubscribeToAll(subCtx, opts)
	if err != nil {
		return false, fmt.Errorf("subscribe to $all after %v: %w", from, err)
	}
	defer func() { _ = sub.Close() }()

	items := make(chan *client.SubscriptionEvent, s.cfg.BatchSize)
	var reader sync.WaitGroup
	reader.Add(1)
	go func() {
		defer reader.Done()
		for {
			ev := sub.Recv()
			select {
			case items <- ev:
			case <-subCtx.Done():
				return
			}
			if ev.SubscriptionDropped != nil {
				return
			}
		}
	}()
	defer reader.Wait() // after cancel (deferred later, so run first) ends it
	defer cancel()

	for {
		var first *client.SubscriptionEvent
		select {
		case <-s.closing:
			return progressed, errClosing
		case first = <-items:
		}
		batch, upto, dropped, closed := s.collect(from, first, items)
		if closed {
			return progressed, errClosing
		}
		if len(batch) > 0 || upto.Compare(s.last) > 0 {
			for {
				err := s.apply(ctx, out, batch, upto)
				if err == nil {
					progressed = true
					break
				}
				if !errors.Is(err, errNacked) {
					return progressed, err
				}
				t := time.NewTimer(s.cfg.ResendInterval)
				select {
				case <-s.closing:
					t.Stop()
					return progressed, errClosing
				case <-t.C:
				}
			}
		}
		if dropped != nil {
			return progressed, dropped
		}
	}
}

// collect is the batch that starts with first, of the subscription from
// from: what has already arrived,
// up to BatchSize events, and the rest of the last event's append, which the
// server sends next (it wrote the append at once), waited for: a batch is
// one transaction of the projection's, so no read sees half of an append.
// upto is the furthest position seen; dropped, the subscription's end (a
// batch that it cut inside an append ends before that append, whose events
// the next subscription delivers again); closed, that Close came while it
// waited.
func (s *ESDBSubscriber) collect(from eventstore.Position, first *client.SubscriptionEvent, items <-chan *client.SubscriptionEvent) (
	batch []*client.RecordedEvent, upto eventstore.Position, dropped error, closed bool) {
	upto = s.last
	take := func(ev *client.SubscriptionEvent) {
		switch {
		case ev.SubscriptionDropped != nil:
			dropped = errors.New("subscription dropped")
			if err := ev.SubscriptionDropped.Error; err != nil {
				dropped = fmt.Errorf("subscription to $all after %v dropped: %w", from, s.cfg.Store.DroppedError(err))
			}
		case ev.CheckPointReached != nil:
			p := esdb.PositionOf(*ev.CheckPointReached)
			if p.Compare(upto) > 0 {
				upto = p
			}
		case ev.EventAppeared != nil:
			rec := ev.EventAppeared.OriginalEvent()
			if rec == nil {
				return
			}
			p := esdb.PositionOf(rec.Position)
			if p.Compare(s.last) <= 0 {
				return // at or before the checkpoint: already applied
			}
			if strings.HasPrefix(rec.EventType, "$") {
				// The server filters these out; never hand one to a projection.
				if p.Compare(upto) > 0 {
					upto = p
				}
				return
			}
			batch = append(batch, rec)
			if p.Compare(upto) > 0 {
				upto = p
			}
		}
	}
	inAppend := func() bool { return len(batch) > 0 && esdb.AppendRest(batch[len(batch)-1]) > 0 }
	take(first)
	for dropped == nil {
		if len(batch) < s.cfg.BatchSize {
			select {
			case ev := <-items:
				take(ev)
				continue
			default:
			}
		}
		// The batch ends here (full, or nothing more has arrived) unless it
		// ends inside an append: only then is the last event's metadata read.
		if !inAppend() {
			break
		}
		select {
		case ev := <-items:
			take(ev)
		case <-s.closing:
			return batch, upto, nil, true
		}
	}
	if dropped != nil && inAppend() {
		// Dropped inside an append: what went before it is applied, the
		// append comes again whole from the next subscription.
		whole := len(batch) - 1
		for whole >= 0 && esdb.AppendRest(batch[whole]) > 0 {
			whole--
		}
		batch, upto = batch[:whole+1], s.last
		if whole >= 0 {
			upto = esdb.PositionOf(batch[whole].Position)
		}
	}
	return batch, upto, dropped, false
}

// apply delivers batch in one transaction and commits it with the checkpoint upto.
func (s *ESDBSubscriber) apply(ctx context.Context, out chan<- *message.Message, batch []*client.RecordedEvent, upto eventstore.Position) error {
	if upto.Commit > math.MaxInt64 || upto.Prepare > math.MaxInt64 {
		return fmt.Errorf("esdb position %v out of range", upto)
	}
	tx, err := s.cfg.Pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }() // a no-op after Commit
	group := s.cfg.ConsumerGroup
	// The checkpoint row is locked first, so a replay swapping the tables in
	// (Replayer) waits for this batch or this batch for it; events the
	// replay applied already (the checkpoint moved past them) are skipped.
	var saved eventstore.Position
	var commit, prepare int64
	err = tx.QueryRow(ctx, `SELECT commit_position, prepare_position FROM esdb_checkpoints
		WHERE consumer_group = $1 FOR UPDATE`, group).Scan(&commit, &prepare)
	switch {
	case err == nil:
		saved = eventstore.Position{Commit: uint64(commit), Prepare: uint64(prepare)}
	case !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("lock esdb checkpoint: %w", err)
	}
	if upto.Compare(saved) <= 0 {
		s.last = saved
		return tx.Commit(ctx)
	}
	msgCtx := ContextWithTx(ctx, tx)
	for _, rec := range batch {
		if esdb.PositionOf(rec.Position).Compare(saved) <= 0 {
			continue
		}
		msg := esdbMessage(rec)
		msg.SetContext(msgCtx)
		select {
		case out <- msg:
		case <-s.closing:
			return errClosing
		}
		// No escape on Close: the handler may be writing through tx, and the
		// router acks or nacks every message it was given.
		select {
		case <-msg.Acked():
		case <-msg.Nacked():
			return errNacked
		}
	}
	if _, err := tx.Exec(ctx, `WITH saved AS (
			INSERT INTO esdb_checkpoints (consumer_group, commit_position, prepare_position) VALUES ($1, $2, $3)
			ON CONFLICT (consumer_group) DO UPDATE SET
				commit_position = excluded.commit_position,
				prepare_position = excluded.prepare_position
			RETURNING 1)
		SELECT pg_notify('`+postgres.PositionsChannel+`', $4) FROM saved`,
		group, int64(upto.Commit), int64(upto.Prepare), group+" "+upto.String()); err != nil {
		return fmt.Errorf("save esdb checkpoint: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit esdb checkpoint: %w", err)
	}
	s.last = upto
	if s.cfg.Listener != nil {
		s.cfg.Listener.advance(group, upto)
	}
	return nil
}

// esdbMessage maps an EventStoreDB event to a message with the metadata of
// postgres.Schema's messages. An event whose metadata cannot be read still
// becomes a message (with what could be read): the projection then stops at
// it as a poison event instead of skipping it.
func esdbMessage(rec *client.RecordedEvent) *message.Message {
	msg := message.NewMessage(rec.EventID.String(), rec.Data)
	var stored struct {
		eventstore.Metadata
		RecordedAt    time.Time `json:"recorded_at"`
		SchemaVersion int       `json:"schema_version"`
	}
	meta := []byte(`{}`)
	if len(rec.UserMetadata) > 0 {
		meta = rec.UserMetadata
		_ = json.Unmarshal(rec.UserMetadata, &stored)
	}
	recordedAt := stored.RecordedAt
	if recordedAt.IsZero() {
		recordedAt = rec.CreatedDate
	}
	schemaVersion := stored.SchemaVersion
	if schemaVersion == 0 {
		schemaVersion = 1
	}
	msg.Metadata.Set(postgres.MetaEventType, rec.EventType)
	msg.Metadata.Set(postgres.MetaSchemaVersion, strconv.Itoa(schemaVersion))
	msg.Metadata.Set(postgres.MetaStreamID, rec.StreamID)
	msg.Metadata.Set(postgres.MetaVersion, strconv.FormatUint(rec.EventNumber+1, 10))
	msg.Metadata.Set(postgres.MetaPosition, esdb.PositionOf(rec.Position).String())
	msg.Metadata.Set(postgres.MetaRecordedAt, recordedAt.UTC().Format(time.RFC3339Nano))
	msg.Metadata.Set(postgres.MetaMetadata, string(meta))
	return msg
}
