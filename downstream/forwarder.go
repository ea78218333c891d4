package downstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmnats "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/nats"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"lectern/events"
	"lectern/projections"
)

const (
	// Name is the forwarder's consumer group: its checkpoint is this
	// group's row in projection_offsets (or esdb_checkpoints). A persisted
	// identifier: renaming it republishes the whole history.
	Name = "downstream"
	// DefaultTopic is the topic messages are published to: the watermill-sql
	// table watermill_lectern_classroom (created by migration 00010), or the
	// JetStream stream and subject of that name.
	DefaultTopic = "lectern_classroom"
)

// Config selects the broker.
type Config struct {
	// BrokerURL is nats://host:port for NATS JetStream (several, comma
	// separated, for a cluster); empty for the watermill-sql topic in the
	// service's own database.
	BrokerURL string
	// Topic overrides DefaultTopic.
	Topic string
	// Retention is how long published messages are kept: older ones are
	// deleted from the PostgreSQL topic (RunRetention), and a JetStream
	// stream Lectern creates discards them. Zero keeps them all.
	Retention time.Duration
	Logger    *slog.Logger
}

// Forwarder publishes every class, course, partner and enrollment event, and
// every user.erased (so that subscribers erase what they hold of the user,
// partners' personal data included), in log order, as a CloudEvent. It is a
// projection (Projection) run by its own projections.Runner under Run's
// supervision.
type Forwarder struct {
	topic     string
	pub       publisher
	retention time.Duration
	logger    *slog.Logger

	mu     sync.Mutex
	status projections.Status
}

// publisher sends one message; tx is the forwarder's batch transaction.
type publisher interface {
	publish(ctx context.Context, tx pgx.Tx, msg *message.Message) error
	// prepare runs once before the forwarder starts (topic tables, streams).
	prepare(ctx context.Context, pool *pgxpool.Pool) error
	// trim deletes the messages published before the cutoff, if the
	// publisher keeps them (the broker's own retention applies otherwise).
	trim(ctx context.Context, pool *pgxpool.Pool, before time.Duration) (int64, error)
	close() error
}

// New returns a forwarder for cfg's broker.
func New(cfg Config) (*Forwarder, error) {
	if cfg.Topic == "" {
		cfg.Topic = DefaultTopic
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Retention < 0 {
		return nil, fmt.Errorf("LECTERN_BROKER_RETENTION %s: want a positive duration, or 0 to keep every message", cfg.Retention)
	}
	f := &Forwarder{topic: cfg.Topic, retention: cfg.Retention, logger: cfg.Logger.With("projection", Name), status: projections.Status{Name: Name}}
	wlog := watermill.NewSlogLogger(f.logger)
	switch {
	case strings.HasPrefix(cfg.BrokerURL, "nats://"):
		if strings.ContainsAny(cfg.Topic, ".*> ") {
			return nil, fmt.Errorf("LECTERN_BROKER_TOPIC %q: a JetStream stream name has no '.', '*', '>' or spaces", cfg.Topic)
		}
		p, err := newNATSPublisher(cfg.BrokerURL, cfg.Topic, cfg.Retention, wlog)
		if err != nil {
			return nil, err
		}
		f.pub = p
	case cfg.BrokerURL == "":
		f.pub = &sqlPublisher{topic: cfg.Topic, logger: wlog}
	default:
		return nil, fmt.Errorf("LECTERN_BROKER_URL %q: want nats://host:port, or unset for the PostgreSQL topic", cfg.BrokerURL)
	}
	return f, nil
}

// Topic is the topic the forwarder publishes to.
func (f *Forwarder) Topic() string { return f.topic }

// Close releases the broker connection.
func (f *Forwarder) Close() error { return f.pub.close() }

// Projection is the forwarder's consumer group: one handler per published
// event type. Its handlers run one at a time in log order, so messages keep
// the log's order (and so each class's).
func (f *Forwarder) Projection() projections.Projection {
	return projections.Projection{Name: Name, Handlers: []projections.GroupHandler{
		on[events.CourseCreated](f), on[events.CourseUpdated](f), on[events.CourseStatusChanged](f),
		on[events.ClassCreated](f), on[events.ClassUpdated](f), on[events.ClassStatusChanged](f),
		on[events.InviteCodeIssued](f), on[events.InviteCodeUsed](f), on[events.InviteCodeRevoked](f), on[events.InviteCodeLimitsChanged](f),
		on[events.EnrollmentCreated](f), on[events.EnrollmentDropped](f),
		on[events.PartnerCreated](f), on[events.PartnerErased](f),
		on[events.UserErased](f),
	}}
}

// testHookBeforePublish, when set (by tests only), runs before each publish:
// a slow or failing broker.
var testHookBeforePublish func()

func on[T events.Event](f *Forwarder) projections.GroupHandler {
	return projections.On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e T) error {
		ce, err := Encode(m, e)
		if err != nil {
			return err
		}
		msg, err := Message(ce)
		if err != nil {
			return err
		}
		msg.SetContext(ctx)
		if testHookBeforePublish != nil {
			testHookBeforePublish()
		}
		if err := f.pub.publish(ctx, tx, msg); err != nil {
			return fmt.Errorf("publish %s %s to %s: %w", e.EventType(), m.EventID, f.topic, err)
		}
		f.published()
		return nil
	})
}

// sqlPublisher inserts into the topic's watermill-sql table (the stock
// PostgreSQL schema) through the forwarder's own transaction: the message
// and the checkpoint commit together, so each event is published exactly
// once unless the checkpoint is reset.
type sqlPublisher struct {
	topic  string
	logger watermill.LoggerAdapter
}

func (p *sqlPublisher) publish(ctx context.Context, tx pgx.Tx, msg *message.Message) error {
	// The projections' pool commits without waiting for the WAL flush. A
	// published message must be durable once visible: a consumer may have
	// read it, and a crash that lost it would publish it again under a new
	// (possibly lower) transaction id, behind that consumer's offset.
	if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = on"); err != nil {
		return err
	}
	pub, err := wsql.NewPublisher(wsql.TxFromPgx(tx), wsql.PublisherConfig{SchemaAdapter: wsql.DefaultPostgreSQLSchema{}}, p.logger)
	if err != nil {
		return err
	}
	return pub.Publish(p.topic, msg)
}

// prepare creates a non-default topic's tables with watermill-sql's own
// DDL, as a stock subscriber would; migration 00010 creates the default's.
func (p *sqlPublisher) prepare(ctx context.Context, pool *pgxpool.Pool) error {
	if p.topic == DefaultTopic {
		return nil
	}
	qs, err := wsql.DefaultPostgreSQLSchema{}.SchemaInitializingQueries(wsql.SchemaInitializingQueriesParams{Topic: p.topic})
	if err != nil {
		return err
	}
	oqs, err := wsql.DefaultPostgreSQLOffsetsAdapter{}.SchemaInitializingQueries(wsql.OffsetsSchemaInitializingQueriesParams{Topic: p.topic})
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, q := range append(qs, oqs...) {
			if _, err := tx.Exec(ctx, q.Query, q.Args...); err != nil {
				return fmt.Errorf("topic %s: %w", p.topic, err)
			}
		}
		return nil
	})
}

// trimBatch bounds one DELETE of trim, as the janitor bounds its own: the
// first trim after a large history was published would otherwise delete
// it in one long transaction, and every projection waits for the log's
// visibility horizon, which such a transaction holds back.
var trimBatch = 10_000

// trim deletes the messages the topic's table holds from before the
// cutoff, trimBatch at a time. A stock subscriber reads past its offset, so
// one that is further behind than the retention misses what was deleted,
// as with a broker's retention.
func (p *sqlPublisher) trim(ctx context.Context, pool *pgxpool.Pool, before time.Duration) (int64, error) {
	table := wsql.DefaultPostgreSQLSchema{}.MessagesTable(p.topic)
	// created_at is the stock schema's TIMESTAMP (the session's local time).
	sql := fmt.Sprintf(`DELETE FROM %[1]s WHERE ctid IN (SELECT ctid FROM %[1]s
		WHERE created_at < LOCALTIMESTAMP - make_interval(secs => $1) LIMIT %[2]d)`, table, trimBatch)
	var deleted int64
	for {
		tag, err := pool.Exec(ctx, sql, before.Seconds())
		if err != nil {
			return deleted, err
		}
		deleted += tag.RowsAffected()
		if tag.RowsAffected() < int64(trimBatch) {
			return deleted, nil
		}
	}
}

func (p *sqlPublisher) close() error { return nil }

// natsPublisher publishes to a JetStream stream and waits for its ack; the
// checkpoint commits afterwards, so a crash in between publishes again (the
// stream drops a repeated Nats-Msg-Id within its duplicate window).
//
// It fails fast while the broker is away: the forwarder's transaction holds
// the log's visibility horizon for every projection, so it must never wait
// long on NATS (see Run).
type natsPublisher struct {
	conn      *nats.Conn
	js        nats.JetStreamContext
	pub       *wmnats.Publisher
	topic     string
	retention time.Duration // the MaxAge of a stream Lectern creates

	mu        sync.Mutex
	streamOK  bool
	failUntil time.Time
	lastErr   error
}

// publishTimeout bounds the wait for JetStream's ack.
const publishTimeout = 2 * time.Second

// failFast is how long after a failed publish further publishes fail at
// once, so the runner's quick retries do not each wait publishTimeout.
const failFast = time.Second

func newNATSPublisher(url, topic string, retention time.Duration, logger watermill.LoggerAdapter) (*natsPublisher, error) {
	// A broker that is down at start is retried in the background, as
	// after a disconnection; publishes fail until it is back.
	conn, err := nats.Connect(url, nats.Name("lectern downstream"), nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1))
	if err != nil {
		return nil, fmt.Errorf("LECTERN_BROKER_URL: %w", err)
	}
	js, err := conn.JetStream(nats.MaxWait(publishTimeout))
	if err != nil {
		conn.Close()
		return nil, err
	}
	pub, err := wmnats.NewPublisherWithNatsConn(conn, wmnats.PublisherPublishConfig{
		Marshaler:         &wmnats.NATSMarshaler{},
		SubjectCalculator: wmnats.DefaultSubjectCalculator,
		JetStream: wmnats.JetStreamConfig{
			TrackMsgId:     true, // Nats-Msg-Id: the event id
			ConnectOptions: []nats.JSOpt{nats.MaxWait(publishTimeout)},
		},
	}, logger)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &natsPublisher{conn: conn, js: js, pub: pub, topic: topic, retention: retention}, nil
}

func (p *natsPublisher) publish(_ context.Context, _ pgx.Tx, msg *message.Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Now().Before(p.failUntil) {
		return p.lastErr
	}
	err := p.send(msg)
	if err != nil {
		p.failUntil, p.lastErr = time.Now().Add(failFast), err
	}
	return err
}

func (p *natsPublisher) send(msg *message.Message) error {
	if !p.conn.IsConnected() {
		return fmt.Errorf("NATS %s: not connected (%s)", p.conn.ConnectedUrlRedacted(), p.conn.Status())
	}
	if !p.streamOK {
		if err := ensureStream(p.js, p.topic, p.retention); err != nil {
			return err
		}
		p.streamOK = true
	}
	return p.pub.Publish(p.topic, msg)
}

// ensureStream creates the topic's stream (subject = stream name = topic)
// unless it exists; an existing stream is left as its operator set it.
func ensureStream(js nats.JetStreamManager, topic string, retention time.Duration) error {
	if _, err := js.StreamInfo(topic); err == nil {
		return nil
	} else if !errors.Is(err, nats.ErrStreamNotFound) {
		return fmt.Errorf("JetStream stream %s: %w", topic, err)
	}
	_, err := js.AddStream(&nats.StreamConfig{
		Name:       topic,
		Subjects:   []string{topic},
		Storage:    nats.FileStorage,
		Duplicates: 2 * time.Minute,
		MaxAge:     retention,
	})
	if err != nil && !errors.Is(err, nats.ErrStreamNameAlreadyInUse) {
		return fmt.Errorf("JetStream stream %s: %w", topic, err)
	}
	return nil
}

func (p *natsPublisher) prepare(context.Context, *pgxpool.Pool) error { return nil }

// trim leaves retention to the stream (MaxAge, set when Lectern creates it).
func (p *natsPublisher) trim(context.Context, *pgxpool.Pool, time.Duration) (int64, error) {
	return 0, nil
}

func (p *natsPublisher) close() error { return p.pub.Close() }

// RunRetention deletes published messages older than the retention, at
// start and then every hour, until ctx ends. Nothing when the retention is
// zero.
func (f *Forwarder) RunRetention(ctx context.Context, pool *pgxpool.Pool) {
	if f.retention == 0 {
		return
	}
	for {
		if n, err := f.Trim(ctx, pool); err != nil && ctx.Err() == nil {
			f.logger.Warn("downstream topic: cannot delete messages past the retention", "topic", f.topic, "error", err)
		} else if n > 0 {
			f.logger.Info("downstream topic: deleted messages past the retention", "topic", f.topic, "deleted", n, "retention", f.retention)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Hour):
		}
	}
}

// Trim deletes the published messages older than the retention; it reports
// how many.
func (f *Forwarder) Trim(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	if f.retention == 0 {
		return 0, nil
	}
	return f.pub.trim(ctx, pool, f.retention)
}

// Status is the forwarder's health: Stalled while it is failing (the broker
// is away, or an event cannot be published), with the last error, until an
// event is published again.
func (f *Forwarder) Status() projections.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status
}

func (f *Forwarder) published() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.status.Stalled {
		f.logger.Info("downstream forwarder publishing again", "topic", f.topic)
	}
	f.status = projections.Status{Name: Name}
}

func (f *Forwarder) failing(st projections.Status) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st.Name, st.Stalled = Name, true
	f.status = st
}

// Backoff bounds Run's waits between restarts.
var (
	FirstBackoff = time.Second
	MaxBackoff   = 30 * time.Second
)

// Run runs the forwarder until ctx ends. newRunner returns a runner of
// Projection alone (service.New builds it like the read models' runner).
//
// A runner stops a projection whose event fails five times in a row, which
// is right for a read model's poison event but wrong for a broker outage:
// so Run restarts a stopped forwarder after a backoff (1 s doubling to
// 30 s), outside any transaction, forever. It never skips an event. The
// failure shows in Status (and in /metrics), not in /readyz: an outage of
// the broker must not take the HTTP service out of its load balancer.
func (f *Forwarder) Run(ctx context.Context, pool *pgxpool.Pool, newRunner func() *projections.Runner) {
	backoff := FirstBackoff
	for {
		if err := f.pub.prepare(ctx, pool); err != nil {
			f.failing(projections.Status{Error: err.Error()})
			f.logger.Error("downstream forwarder cannot prepare its topic; retrying", "topic", f.topic, "error", err, "retry_in", backoff)
		} else {
			started := time.Now()
			st, stopped := f.runOnce(ctx, newRunner())
			if ctx.Err() != nil {
				return
			}
			if stopped {
				f.failing(st)
				if time.Since(started) > 2*MaxBackoff {
					backoff = FirstBackoff // it had been healthy a while
				}
				f.logger.Warn("downstream forwarder stopped; restarting it after a backoff, from its checkpoint",
					"topic", f.topic, "event_id", st.EventID, "error", st.Error, "retry_in", backoff)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, MaxBackoff)
	}
}

// runOnce runs r until ctx ends or the forwarder stops; it reports why.
func (f *Forwarder) runOnce(ctx context.Context, r *projections.Runner) (projections.Status, bool) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if err := <-done; err != nil {
				f.logger.Debug("forwarder runner ended at shutdown", "error", err)
			}
			return projections.Status{}, false
		case err := <-done:
			if ctx.Err() != nil {
				return projections.Status{}, false
			}
			msg := "the runner ended"
			if err != nil {
				msg = err.Error()
			}
			return projections.Status{Error: msg}, true
		case <-tick.C:
			for _, st := range r.Statuses() {
				if st.Name == Name && st.Stalled {
					cancel()
					if err := <-done; err != nil {
						f.logger.Debug("forwarder runner stopped", "error", err)
					}
					return st, true
				}
			}
		}
	}
}
