package projections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/cqrs"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"lectern/events"
	"lectern/eventstore/postgres"
	"lectern/failpoint"
	"lectern/pgtext"
)

// Projection is a read model's consumer group and its event handlers. The
// name is a persisted identifier (it names the group's offsets row): never
// rename one casually.
type Projection struct {
	Name     string
	Handlers []GroupHandler
	// Tables are the read-model tables the handlers write and nothing else
	// writes: a replay rebuilds them from the log and swaps them in.
	Tables []string
	// Loaders, if any, fold some of the handlers' event types for a replay's
	// catch-up (see Loader); each call returns a new, empty loader.
	Loaders []func() Loader
	// OnPoison is what the projection does with an event it cannot apply
	// (default StopOnPoison).
	OnPoison PoisonPolicy
	// Swapped are statements a replay runs in the transaction that swaps
	// its tables in, after them: what a table built LIKE the live one
	// lacks (triggers), and what the swap means to others.
	Swapped []string
}

// txFrom is the transaction a message is applied in: the savepoint the
// runner opened around it, a subscriber's own (ContextWithTx), or
// watermill-sql's poll transaction (its public TxFromContext).
func txFrom(ctx context.Context) (pgx.Tx, error) {
	if sp, ok := ctx.Value(savepointKey{}).(*savepointTx); ok {
		return sp, nil
	}
	if tx, ok := ctx.Value(txKey{}).(pgx.Tx); ok {
		return tx, nil
	}
	wtx, ok := wsql.TxFromContext(ctx)
	if !ok {
		return nil, errors.New("projection: no transaction in context")
	}
	if pt, ok := wtx.(*pollTx); ok {
		return pt.Tx, nil
	}
	ptx, ok := wtx.(*wsql.PgxTx)
	if !ok {
		return nil, fmt.Errorf("projection: transaction is %T, not pgx", wtx)
	}
	return ptx.Tx, nil
}

func metaOf(msg *message.Message) (events.Meta, error) {
	m := events.Meta{
		EventID:  msg.UUID,
		StreamID: msg.Metadata.Get(postgres.MetaStreamID),
		Position: msg.Metadata.Get(postgres.MetaPosition),
	}
	var err error
	if m.Version, err = strconv.ParseInt(msg.Metadata.Get(postgres.MetaVersion), 10, 64); err != nil {
		return m, fmt.Errorf("event %s version: %w", msg.UUID, err)
	}
	if m.RecordedAt, err = time.Parse(time.RFC3339Nano, msg.Metadata.Get(postgres.MetaRecordedAt)); err != nil {
		return m, fmt.Errorf("event %s recorded_at: %w", msg.UUID, err)
	}
	var md struct {
		CorrelationID string `json:"correlation_id"`
		CausationID   string `json:"causation_id"`
		UserID        int64  `json:"user_id"`
		RequestID     string `json:"request_id"`
		TraceParent   string `json:"traceparent"`
		TraceState    string `json:"tracestate"`
	}
	if err := postgres.DecodeMetadata(msg, &md); err != nil {
		return m, fmt.Errorf("event %s metadata: %w", msg.UUID, err)
	}
	m.CorrelationID, m.CausationID, m.UserID, m.RequestID = md.CorrelationID, md.CausationID, md.UserID, md.RequestID
	m.TraceParent, m.TraceState = md.TraceParent, md.TraceState
	return m, nil
}

// marshaler names events by their stable type names and decodes payloads.
type marshaler struct{ registry *events.Registry }

func (marshaler) Marshal(any) (*message.Message, error) {
	return nil, errors.New("events are appended through the event store")
}

func (m marshaler) Unmarshal(msg *message.Message, v any) error {
	sv, _ := strconv.Atoi(msg.Metadata.Get(postgres.MetaSchemaVersion)) // unset reads as version 1
	if err := m.registry.DecodeInto(msg.Metadata.Get(postgres.MetaEventType), sv, json.RawMessage(msg.Payload), v); err != nil {
		return fmt.Errorf("decode %s %s: %w", msg.Metadata.Get(postgres.MetaEventType), msg.UUID, err)
	}
	return nil
}

func (marshaler) Name(v any) string {
	if e, ok := v.(events.Event); ok {
		return e.EventType()
	}
	return fmt.Sprintf("%T", v)
}

func (marshaler) NameFromMessage(msg *message.Message) string {
	return msg.Metadata.Get(postgres.MetaEventType)
}

// Status is a projection's health, for readiness checks.
type Status struct {
	Name    string
	Stalled bool
	Error   string
	EventID string
	// Skipped counts the events this process passed over (SkipPoison, or an
	// operator's skip).
	Skipped int64
}

// Runner runs every projection until its context ends.
type Runner struct {
	pool        *pgxpool.Pool
	listener    *Listener
	registry    *events.Registry
	logger      *slog.Logger
	projections []Projection
	// MaxAttempts of one event before its projection stops as poisoned.
	MaxAttempts int
	// Fallback is how often an idle projection probes the log without a
	// notification: a lost one, an append by a process that does not announce,
	// events it does not handle (no append of theirs wakes it) to skip.
	Fallback time.Duration
	// AttemptTimeout bounds one attempt at applying one event.
	AttemptTimeout time.Duration
	// Subscribers, if set, replaces watermill-sql's subscriber (EventStoreDB).
	Subscribers func(group string) (message.Subscriber, error)
	// OperatorPoll is how often a projection stopped on a poison event
	// looks for an operator's retry or skip of it.
	OperatorPoll time.Duration
	// Restarted says that whoever runs this runner restarts a stopped
	// projection (the downstream forwarder after a broker outage): a stop is
	// then logged as a warning, not as a poison event.
	Restarted bool
	// Tracing, if set, traces each event's application (or each live
	// batch's) with a span linked to the append that recorded it.
	Tracing trace.TracerProvider
	// OneAtATime turns live batches off: every event is applied on its own,
	// under a savepoint, as in careful mode. Not a setting of the service:
	// the bench measures live batches against it, and tests hold the batches
	// to it.
	OneAtATime bool

	mu      sync.Mutex
	status  map[string]*Status
	skipped map[string]int64
	// retrying is, by projection, the event an operator asked to retry.
	retrying eventMarks
	// skipping is, by projection, the event to pass over without trying
	// it again: an operator's skip, or one SkipPoison decided on after the
	// event broke its transactions (brokeTransaction).
	skipping eventMarks
	// broken counts, by projection, the attempts in a row at one event that
	// broke their transaction (brokeTransaction); brokens counts its entries.
	broken  map[string]brokenRun
	brokens atomic.Int32
	// restart holds the projections to start again at once, on a new
	// connection, and how many attempts in a row broke theirs.
	restart map[string]int
}

// NewRunner returns a runner of projections.
func NewRunner(pool *pgxpool.Pool, listener *Listener, registry *events.Registry, logger *slog.Logger, projections ...Projection) *Runner {
	return &Runner{
		pool: pool, listener: listener, registry: registry, logger: logger, projections: projections,
		MaxAttempts: 5, Fallback: 250 * time.Millisecond, AttemptTimeout: 10 * time.Second, OperatorPoll: time.Second,
		status: map[string]*Status{}, skipped: map[string]int64{},
		broken: map[string]brokenRun{}, restart: map[string]int{},
	}
}

// Statuses reports every projection's health.
func (r *Runner) Statuses() []Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Status, 0, len(r.projections))
	for _, p := range r.projections {
		st := Status{Name: p.Name}
		if s, ok := r.status[p.Name]; ok {
			st = *s
		}
		st.Skipped = r.skipped[p.Name]
		out = append(out, st)
	}
	return out
}

// Run starts one router per projection and blocks until ctx ends and every
// in-flight event has been applied or rolled back. The routers run on a
// context of their own and are stopped with Close: cancelling a subscription's
// context would make watermill-sql commit under a running handler.
func (r *Runner) Run(ctx context.Context) error {
	if r.Subscribers == nil {
		if err := r.ensureOffsets(ctx); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(r.projections))
	for _, p := range r.projections {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.supervise(ctx, p); err != nil {
				errs <- fmt.Errorf("projection %s: %w", p.Name, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	var all error
	for err := range errs {
		all = errors.Join(all, err)
	}
	return all
}

// supervise runs p's router until ctx ends. When the router stops on a
// poison event, it waits for an operator's retry or skip of that event and
// starts it again (unless Restarted: the caller restarts it).
func (r *Runner) supervise(ctx context.Context, p Projection) error {
	recovering := 0 // restarts in a row after a lost transaction
	for {
		router, stop, err := r.router(p)
		if err != nil && recovering > 0 && ctx.Err() == nil {
			// As below: the database may still be away.
			recovering++
			r.logger.Warn("projection could not start again; retrying", "projection", p.Name, "error", err)
			if !pauseBeforeRestart(ctx, recovering) {
				return nil
			}
			continue
		}
		if err != nil {
			return err
		}
		ran := make(chan error, 1)
		go func() { ran <- router.Run(context.WithoutCancel(ctx)) }()
		select {
		case <-ctx.Done():
			serr := stop()
			return errors.Join(<-ran, serr)
		case err := <-ran:
			if serr := stop(); err == nil {
				err = serr
			}
			n, again := r.takeRestart(p.Name)
			_, stalled := r.stalledOn(p.Name)
			if !again && recovering > 0 && err != nil && !stalled && ctx.Err() == nil {
				// Started again after a lost transaction, the router could
				// not run (the database still away, as in a failover): it
				// is tried again rather than given up on.
				r.logger.Warn("projection could not start again; retrying", "projection", p.Name, "error", err)
				again, n = true, recovering+1
			}
			if again {
				// A lost transaction: a new router, on a new connection.
				recovering = n
				if !pauseBeforeRestart(ctx, n) {
					return nil
				}
				continue
			}
			recovering = 0
			st, stalled := r.stalledOn(p.Name)
			if !stalled || st.EventID == "" || r.Restarted || ctx.Err() != nil {
				return err // stopped for good, or stopped by whoever restarts it
			}
			action, werr := r.awaitOperator(ctx, p.Name, st.EventID)
			if werr != nil {
				if ctx.Err() != nil {
					return nil
				}
				return werr
			}
			r.mu.Lock()
			delete(r.status, p.Name)
			if action == DeadLetterRetry {
				r.retrying.mark(p.Name, st.EventID)
			}
			r.mu.Unlock()
			if action == DeadLetterSkip {
				r.skipping.mark(p.Name, st.EventID)
			}
			r.logger.Info("projection restarting at the operator's request", "projection", p.Name, "event_id", st.EventID, "action", action)
		}
	}
}

// pauseBeforeRestart waits before a projection starts again after n lost
// transactions (or failed starts) in a row, a pause that grows with n;
// false when ctx ended first.
func pauseBeforeRestart(ctx context.Context, n int) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(min(time.Duration(n)*100*time.Millisecond, 2*time.Second)):
		return true
	}
}

// stalledOn is the projection's status if it stopped on a poison event.
func (r *Runner) stalledOn(name string) (Status, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st, ok := r.status[name]
	if !ok || !st.Stalled {
		return Status{}, false
	}
	return *st, true
}

// awaitOperator polls the dead letter of eventID until an operator asks to
// retry or skip it, and returns which.
func (r *Runner) awaitOperator(ctx context.Context, name, eventID string) (string, error) {
	t := time.NewTicker(r.OperatorPoll)
	defer t.Stop()
	for {
		status, err := deadLetterStatus(ctx, r.pool, name, eventID)
		if err != nil && ctx.Err() == nil {
			r.logger.Warn("reading a dead letter", "projection", name, "event_id", eventID, "error", err)
		}
		if status == DeadLetterRetry || status == DeadLetterSkip {
			return status, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-t.C:
		}
	}
}

// ensureOffsets gives every group its offsets row (at the start of the log,
// as a missing row reads), as watermill-sql does before subscribing. (Polls
// and a replay's swap exclude each other with the group's advisory lock,
// postgres.LockOffset, which needs no row.)
func (r *Runner) ensureOffsets(ctx context.Context) error {
	groups := make([]string, len(r.projections))
	for i, p := range r.projections {
		groups[i] = p.Name
	}
	_, err := r.pool.Exec(ctx, `
		INSERT INTO projection_offsets (consumer_group, offset_acked, last_processed_transaction_id)
		SELECT g, 0, '0' FROM unnest($1::text[]) AS g
		ON CONFLICT (consumer_group) DO NOTHING`, groups)
	if err != nil {
		return fmt.Errorf("projection offsets: %w", err)
	}
	return nil
}

func (r *Runner) router(p Projection) (*message.Router, func() error, error) {
	wlog := watermill.NewSlogLoggerWithLevelMapping(r.logger.With("projection", p.Name), map[slog.Level]slog.Level{
		slog.LevelInfo: slog.LevelDebug,
	})
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 15 * time.Second}, wlog)
	if err != nil {
		return nil, nil, err
	}
	// closing ends the subscriber's wait for notifications, then the router
	// closes (waiting for in-flight events).
	closing := make(chan struct{})
	handlers := handlersByType(p.Handlers)
	handled := map[string]bool{}
	types := make([]string, 0, len(handlers))
	for _, h := range handlers {
		name := marshaler{}.Name(h.NewEvent())
		handled[name] = true
		types = append(types, name)
	}
	wake, unwake := r.listener.wake(p.Name, types)
	var mode *batchMode // nil: every event on its own
	if batchable(p) && !r.OneAtATime {
		mode = &batchMode{}
	}
	var draining atomic.Pointer[drainingSubscriber]
	// Called by a stall and by the supervisor: once, and a second caller
	// waits for the first.
	stop := sync.OnceValue(func() error {
		close(closing)
		err := router.Close()
		if d := draining.Load(); d != nil { // the router does not wait for it
			err = errors.Join(err, d.Close())
		}
		unwake()
		return err
	})
	at := newApplyTracer(r.Tracing, p.Name)
	if at != nil { // outermost: its span covers every attempt
		router.AddMiddleware(at.middleware(handled))
	}
	router.AddMiddleware(r.attempts(p.Name, p.OnPoison, handled, stop))

	processor, err := cqrs.NewEventGroupProcessorWithConfig(router, cqrs.EventGroupProcessorConfig{
		GenerateSubscribeTopic: func(cqrs.EventGroupProcessorGenerateSubscribeTopicParams) (string, error) {
			return postgres.Topic, nil
		},
		SubscriberConstructor: func(params cqrs.EventGroupProcessorSubscriberConstructorParams) (message.Subscriber, error) {
			if r.Subscribers != nil {
				sub, err := r.Subscribers(params.EventGroupName)
				if f, ok := sub.(fatalReporter); ok && err == nil {
					f.OnFatal(func(err error) {
						r.fail(p.Name, err)
						go func() { _ = stop() }()
					})
				}
				return sub, err
			}
			// No ack deadline: on expiry watermill-sql would commit while the
			// handler still runs. Each attempt has its own timeout instead.
			noDeadline := time.Duration(0)
			var schema wsql.SchemaAdapter = postgres.NewSchema(pollBatch)
			if mode != nil {
				schema = newModeSchema(pollBatch, mode)
			}
			beginner := newPollBeginner(r.pool, mode, r.AttemptTimeout, at)
			sub, err := wsql.NewSubscriber(beginner, wsql.SubscriberConfig{
				ConsumerGroup:  params.EventGroupName,
				SchemaAdapter:  schema,
				OffsetsAdapter: postgres.NewOffsets(),
				AckDeadline:    &noDeadline,
				ResendInterval: 50 * time.Millisecond,
				BackoffManager: &wakeBackoff{waker: wake, closing: closing, fallback: r.Fallback, retry: time.Second,
					logger: r.logger, probe: r.prober(params.EventGroupName, types)},
			}, wlog)
			if err != nil {
				return nil, err
			}
			d := newDrainingSubscriber(sub)
			draining.Store(d)
			return d, nil
		},
		AckOnUnknownEvent: true,
		Marshaler:         marshaler{registry: r.registry},
		Logger:            wlog,
	})
	if err != nil {
		return nil, nil, err
	}
	if err := processor.AddHandlersGroup(p.Name, handlers...); err != nil {
		return nil, nil, err
	}
	return router, stop, nil
}

// pollBatch is the most events one poll reads.
const pollBatch = 100

// attempts runs each delivery inside a savepoint, so a failed attempt leaves
// nothing behind, and retries it; an event that keeps failing stops its
// projection loudly instead of being skipped. In a live batch (pollTx) an
// event is only collected: a failure abandons the batch, which is then
// polled again carefully, one event at a time, through this path.
//
// The savepoint goes with the handler's first statement (savepointTx), and
// a successful event's savepoint is not released on its own: the next
// event's releases it, and the commit releases the last.
func (r *Runner) attempts(name string, policy PoisonPolicy, handled map[string]bool, stop func() error) message.HandlerMiddleware {
	var mu sync.Mutex
	var open pgx.Tx // the batch transaction holding an unreleased savepoint
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			ctx := msg.Context()
			bt, batched := batchOf(ctx)
			if batched {
				bt.delivered++
			}
			if !handled[msg.Metadata.Get(postgres.MetaEventType)] {
				return h(msg) // acked as not this projection's: nothing to protect
			}
			skipping := r.skipping.is(name, msg.UUID)
			if skipping && erasure(msg.Metadata.Get(postgres.MetaEventType)) {
				skipping = false // never passed over: tried again
				r.skipping.unmark(name)
			}
			if batched {
				// An event to pass over, or the one an operator asked to
				// retry, goes one at a time, below: there its dead letter
				// is skipped, or resolved once it applies (retried).
				switch {
				case bt.failed != nil:
				case skipping:
					bt.fail(fmt.Errorf("event %s is to be passed over", msg.UUID))
				case r.retrying.is(name, msg.UUID):
					bt.fail(fmt.Errorf("event %s is an operator's retry", msg.UUID))
				}
				if bt.failed == nil {
					if _, err := h(msg); err != nil { // the handler collects the event (handle)
						bt.fail(fmt.Errorf("event %s: %w", msg.UUID, err))
					}
				}
				return nil, nil // acked: the batch's outcome comes with the offset's update
			}
			tx, err := txFrom(ctx)
			if err != nil {
				return nil, err
			}
			mu.Lock()
			defer mu.Unlock()
			if skipping {
				if err := r.passOver(ctx, tx, name, msg); err != nil {
					// Its transaction is broken: start again on a new one.
					if r.requestRestart(name, 1) {
						go func() { _ = stop() }()
					}
					return nil, err
				}
				return nil, nil
			}
			sp := newSavepointTx(tx, "SAVEPOINT projection_event")
			if open == tx {
				sp.pending = []string{"RELEASE SAVEPOINT projection_event", "SAVEPOINT projection_event"}
			}
			spCtx := context.WithValue(ctx, savepointKey{}, sp)
			for attempt := 1; ; attempt++ {
				attemptCtx, cancel := context.WithTimeout(spCtx, r.AttemptTimeout)
				msg.SetContext(attemptCtx)
				out, herr := h(msg)
				cancel()
				// Its text goes to the log and the dead letter: not the
				// values it may quote, which can be personal.
				herr = pgtext.Valueless(herr)
				msg.SetContext(ctx)
				if sp.established() {
					open = tx
				}
				if herr == nil {
					if r.brokens.Load() > 0 {
						r.mended(name, msg.UUID)
					}
					if err := r.retried(ctx, tx, name, msg); err != nil {
						return nil, err
					}
					failpoint.Reach(failpoint.ProjectionApplied)
					return out, nil
				}
				if tx.Conn().IsClosed() {
					// The attempt broke the transaction: its connection
					// closed (lost, or closed by the driver after a value it
					// could not send). Nothing more can happen in it.
					open = nil
					r.brokeTransaction(name, policy, msg, herr, stop)
					return nil, herr
				}
				// An attempt that wrote nothing has nothing to undo; the
				// savepoint survives ROLLBACK TO, ready for the next attempt.
				if sp.established() {
					if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT projection_event"); err != nil {
						// Broken too, as above.
						open = nil
						r.brokeTransaction(name, policy, msg, herr, stop)
						return nil, errors.Join(herr, err)
					}
				}
				if ctx.Err() != nil {
					return nil, herr
				}
				if attempt >= r.MaxAttempts {
					skip, err := r.poisoned(ctx, tx, name, policy, msg, herr, attempt)
					if err != nil {
						return nil, errors.Join(herr, err)
					}
					if skip {
						return nil, nil // acked: the offset moves past it with its dead letter
					}
					r.stall(name, msg, herr)
					go func() { _ = stop() }()
					return nil, herr
				}
				r.logger.Warn("projection handler failed; retrying", "projection", name, "event_id", msg.UUID,
					"event_type", msg.Metadata.Get(postgres.MetaEventType), "attempt", attempt, "error", herr)
				select {
				case <-ctx.Done():
					return nil, herr
				case <-time.After(time.Duration(attempt) * 20 * time.Millisecond):
				}
			}
		}
	}
}

// brokenRun counts the attempts in a row at one event that broke their
// transaction.
type brokenRun struct {
	eventID  string
	attempts int
}

// brokeTransaction follows an attempt at msg that broke its transaction:
// no dead letter can be written in it, nor anything else, and the
// subscriber would deliver the event again in it. The projection starts
// again at once on a new connection (supervise), so that a lost connection
// costs an attempt, not the event. After MaxAttempts such attempts in a row
// the event is poison like any other: its dead letter is written on its own
// and the projection stops; under SkipPoison the dead letter asks for a
// skip, which the restart applies at once (an erasure is never passed
// over). A dead letter that cannot be written (the database still away)
// leaves the projection to start again, and count on.
func (r *Runner) brokeTransaction(name string, policy PoisonPolicy, msg *message.Message, herr error, stop func() error) {
	r.mu.Lock()
	if _, restarting := r.restart[name]; restarting || r.status[name] != nil {
		// Delivered again in the dead transaction before the router stopped:
		// the attempt that broke it is counted already.
		r.mu.Unlock()
		return
	}
	run, ok := r.broken[name]
	if !ok {
		r.brokens.Add(1)
	}
	if run.eventID != msg.UUID {
		run = brokenRun{eventID: msg.UUID}
	}
	run.attempts++
	r.broken[name] = run
	r.mu.Unlock()
	if r.Restarted { // whoever restarts it does, from its checkpoint
		r.stall(name, msg, herr)
		go func() { _ = stop() }()
		return
	}
	if run.attempts >= r.MaxAttempts {
		status := DeadLetterStopped
		if policy == SkipPoison && !erasure(msg.Metadata.Get(postgres.MetaEventType)) {
			status = DeadLetterSkip
		}
		err := recordDeadLetter(context.Background(), r.pool, name, msg, herr, run.attempts, status)
		if err == nil {
			r.mended(name, msg.UUID)
			r.stall(name, msg, herr)
			go func() { _ = stop() }()
			return
		}
		r.logger.Error("recording a dead letter", "projection", name, "event_id", msg.UUID, "error", err)
	}
	r.logger.Warn("projection lost its transaction; starting again on a new connection", "projection", name,
		"event_id", msg.UUID, "attempt", run.attempts, "error", herr)
	r.requestRestart(name, run.attempts)
	go func() { _ = stop() }()
}

// requestRestart has supervise start projection name again at once, after
// attempts broken in a row; false when a restart was requested already.
func (r *Runner) requestRestart(name string, attempts int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, pending := r.restart[name]
	r.restart[name] = attempts
	return !pending
}

// mended forgets projection name's broken attempts at eventID: it
// applied, or is a dead letter. (The events before it in its poll apply
// again at each attempt: they leave the count alone.)
func (r *Runner) mended(name, eventID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if run, ok := r.broken[name]; ok && run.eventID == eventID {
		delete(r.broken, name)
		r.brokens.Add(-1)
	}
}

// takeRestart reports whether projection name is to start again at once,
// and after how many broken attempts.
func (r *Runner) takeRestart(name string) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.restart[name]
	delete(r.restart, name)
	return n, ok
}

// passOver acks msg, which projection name is to pass over, without trying
// it again (it may break the transaction): its dead letter is marked
// skipped in the projection's transaction, which commits it with the offset
// past the event. (An erasure is never passed over: the caller tries it.)
func (r *Runner) passOver(ctx context.Context, tx pgx.Tx, name string, msg *message.Message) error {
	if _, err := tx.Exec(ctx, `UPDATE projection_dead_letters SET status = $3, updated_at = now()
		WHERE projection = $1 AND event_id::text = $2`, name, msg.UUID, DeadLetterSkipped); err != nil {
		return err
	}
	r.skipping.unmark(name)
	if r.retrying.is(name, msg.UUID) { // retried, failed again, then skipped
		r.retrying.unmark(name)
	}
	r.skippedEvent(name, msg)
	return nil
}

// skippedEvent counts and logs an event projection name passed over; attrs
// add to the log line (the error it failed with, where known).
func (r *Runner) skippedEvent(name string, msg *message.Message, attrs ...any) {
	r.mu.Lock()
	r.skipped[name]++
	r.mu.Unlock()
	r.logger.Warn("projection skipped an event it could not apply", append([]any{"projection", name, "event_id", msg.UUID,
		"event_type", msg.Metadata.Get(postgres.MetaEventType), "stream_id", msg.Metadata.Get(postgres.MetaStreamID),
		"position", msg.Metadata.Get(postgres.MetaPosition)}, attrs...)...)
}

// fatalReporter is a subscriber that can fail for good (an ESDBSubscriber
// whose checkpoint the server refuses): the projection then stops, reported.
type fatalReporter interface {
	OnFatal(func(error))
}

// fail reports a projection stopped by its subscriber, at no event.
func (r *Runner) fail(name string, err error) {
	r.logger.Error("projection stopped: its subscription cannot go on", "projection", name, "error", err)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status[name] = &Status{Name: name, Stalled: true, Error: err.Error()}
}

// poisoned records an event that failed attempts times as a dead letter and
// says whether to pass over it: the projection's policy, or an operator's
// skip. A skipped event's dead letter is written in the projection's
// transaction (it commits with the offset that passes the event); a stop's
// on its own, as the projection's transaction rolls back.
func (r *Runner) poisoned(ctx context.Context, tx pgx.Tx, name string, policy PoisonPolicy, msg *message.Message, herr error, attempts int) (bool, error) {
	if r.Restarted {
		return false, nil // not a dead letter: the caller restarts it (the forwarder after a broker outage)
	}
	status, err := deadLetterStatus(ctx, tx, name, msg.UUID)
	if err != nil {
		return false, err
	}
	if (policy == SkipPoison || status == DeadLetterSkip) && !erasure(msg.Metadata.Get(postgres.MetaEventType)) {
		if err := recordDeadLetter(ctx, tx, name, msg, herr, attempts, DeadLetterSkipped); err != nil {
			return false, err
		}
		r.retrying.unmark(name)
		r.skippedEvent(name, msg, "error", herr)
		return true, nil
	}
	return false, recordDeadLetter(context.WithoutCancel(ctx), r.pool, name, msg, herr, attempts, DeadLetterStopped)
}

// retried marks the dead letter an operator asked to retry as resolved once
// its event applies, in the projection's transaction.
func (r *Runner) retried(ctx context.Context, tx pgx.Tx, name string, msg *message.Message) error {
	if !r.retrying.is(name, msg.UUID) {
		return nil
	}
	if _, err := tx.Exec(ctx, `UPDATE projection_dead_letters SET status = 'resolved', updated_at = now()
		WHERE projection = $1 AND event_id::text = $2`, name, msg.UUID); err != nil {
		return err
	}
	r.retrying.unmark(name)
	return nil
}

func (r *Runner) stall(name string, msg *message.Message, err error) {
	level, text := slog.LevelError, "projection stopped at a poison event; it will not advance until the event can be applied"
	if r.Restarted {
		level, text = slog.LevelWarn, "projection stopped at an event it could not apply; it will be restarted from its checkpoint"
	}
	r.logger.Log(context.Background(), level, text,
		"projection", name, "event_id", msg.UUID, "event_type", msg.Metadata.Get(postgres.MetaEventType),
		"stream_id", msg.Metadata.Get(postgres.MetaStreamID), "position", msg.Metadata.Get(postgres.MetaPosition), "error", err)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status[name] = &Status{Name: name, Stalled: true, Error: err.Error(), EventID: msg.UUID}
}

// batchOf returns the live batch a delivery belongs to, if it is batched.
func batchOf(ctx context.Context) (*pollTx, bool) {
	wtx, _ := wsql.TxFromContext(ctx)
	bt, ok := wtx.(*pollTx)
	return bt, ok && bt.batched
}

// batchable reports whether p's events may be applied in live batches: its
// handlers follow the rule a replay relies on (it has tables to replay, and
// every handler can apply sets), one handler an event type once combined
// (a set is applied by its first event's handler; see handlersByType).
func batchable(p Projection) bool {
	if !Replayable(p) {
		return false
	}
	types := map[string]bool{}
	for _, h := range handlersByType(p.Handlers) {
		name := marshaler{}.Name(h.NewEvent())
		if _, ok := h.(replayable); !ok || types[name] {
			return false
		}
		types[name] = true
	}
	return true
}

// GroupHandler is one event handler of a projection (see On).
type GroupHandler = cqrs.GroupEventHandler
