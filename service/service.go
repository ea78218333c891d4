// Package service wires Lectern together: the event store, the commands, the
// projections and the HTTP edge. cmd/lectern and the HTTP tests build the
// same service through it.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"lectern/api"
	"lectern/auth"
	"lectern/authlease"
	"lectern/blobs"
	"lectern/commands"
	"lectern/downstream"
	"lectern/events"
	"lectern/eventstore"
	"lectern/eventstore/esdb"
	"lectern/eventstore/postgres"
	"lectern/janitor"
	"lectern/knowledge"
	"lectern/llm"
	"lectern/mail"
	"lectern/metrics"
	"lectern/personal"
	"lectern/projections"
	"lectern/queries"
	"lectern/quota"
	"lectern/ratelimit"
)

// Config is what a service needs from its environment.
type Config struct {
	Pool        *pgxpool.Pool
	JWTKey      []byte
	AdminEmails []string
	Mail        mail.Sender
	Logger      *slog.Logger
	Now         func() time.Time
	// ConsistencyWait bounds read-your-writes waits (default 2 s).
	ConsistencyWait time.Duration
	// Extract bounds what extracting an uploaded document may cost (zero:
	// knowledge.DefaultExtractLimits).
	Extract knowledge.ExtractLimits
	// TrustedProxies is api.Deps.TrustedProxies.
	TrustedProxies []netip.Prefix
	// ForwardedHeader is api.Deps.ForwardedHeader.
	ForwardedHeader string
	// WriteWait is api.Deps.WriteWait.
	WriteWait time.Duration
	// CORSOrigins is api.Deps.CORSOrigins.
	CORSOrigins []string
	// SkipPoison names the projections that pass over an event they cannot
	// apply (recording it as a dead letter) instead of stopping at it
	// (LECTERN_SKIP_POISON).
	SkipPoison []string
	// SkipSessionCheck is api.Deps.SkipSessionCheck: for the bench only.
	SkipSessionCheck bool
	// AddressLimit overrides the per-minute, per-client-address limits of
	// identity operations and of invite-code joins (0: the defaults, 120
	// and 60): tests send everything from one address.
	AddressLimit int
	// Limits override any other rate limit (zero fields: the defaults,
	// commands.DefaultLimits).
	Limits commands.Limits
	// WriteBudget is each user's budget of bytes their writes record
	// (zero: quota.DefaultRate).
	WriteBudget ratelimit.Rate
	// EventStoreURL selects EventStoreDB (esdb://...) as the event store;
	// empty: the PostgreSQL store in the same database.
	EventStoreURL string
	// Models is the model catalogue (nil: the built-in echo models).
	Models *llm.Catalogue
	// ModelOptions configure the model gateway (tests inject HTTP clients).
	ModelOptions []llm.Option
	// Embedder embeds knowledge chunks (nil: the offline embedder).
	Embedder knowledge.Embedder
	// BrokerURL selects where classroom changes are published for
	// downstream systems: nats://host:port for NATS JetStream; empty: the
	// watermill-sql topic in the same database (docs/subscribing.md).
	BrokerURL string
	// BrokerTopic overrides the topic (downstream.DefaultTopic).
	BrokerTopic string
	// BrokerRetention is how long published messages are kept (0: always).
	BrokerRetention time.Duration
	// StreamHeartbeat is api.Deps.StreamHeartbeat (0: 15 s).
	StreamHeartbeat time.Duration
	// DataKey is the 32-byte master key of personal data (LECTERN_DATA_KEY):
	// personal fields of events are sealed under their subject's key, which
	// it wraps (docs/privacy.md). nil: events are stored in clear, as the
	// bench's baseline does; lectern serve always sets one.
	DataKey []byte
	// PreviousDataKey is the master key being rotated away from
	// (LECTERN_DATA_KEY_PREVIOUS): subject keys it wrapped are read too,
	// until `lectern keys rotate` wraps them under DataKey. nil outside a
	// rotation.
	PreviousDataKey []byte
	// Tracing, if set, traces requests, appends and the projections'
	// applications of events (tracing.Setup; nil: off). The statements are
	// traced by Pool's tracer (tracing.InstrumentPool), which the
	// projections' pools share.
	Tracing trace.TracerProvider
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var err error
	known := map[string]bool{}
	for _, p := range Projections() {
		known[p.Name] = true
	}
	for _, name := range c.SkipPoison {
		if !known[name] {
			err = errors.Join(err, fmt.Errorf("LECTERN_SKIP_POISON: no projection is named %q", name))
		}
	}
	if c.Pool == nil {
		err = errors.Join(err, errors.New("no database pool"))
	}
	if len(c.JWTKey) < auth.MinKeyLen {
		err = errors.Join(err, fmt.Errorf("the JWT signing key must be at least %d bytes", auth.MinKeyLen))
	}
	if c.Mail == nil {
		err = errors.Join(err, errors.New("no mail sender"))
	}
	if c.Logger == nil {
		err = errors.Join(err, errors.New("no logger"))
	}
	return err
}

// newSealer is the key store and sealer of personal data under
// cfg.DataKey; nil without one.
func newSealer(cfg Config) (*personal.Keys, *personal.Sealer, error) {
	if cfg.DataKey == nil {
		if cfg.PreviousDataKey != nil {
			return nil, nil, errors.New("a previous data key (LECTERN_DATA_KEY_PREVIOUS) without a data key")
		}
		return nil, nil, nil
	}
	keys, err := personal.NewRotatingKeys(cfg.Pool, cfg.DataKey, cfg.PreviousDataKey)
	if err != nil {
		return nil, nil, err
	}
	return keys, personal.NewSealer(keys), nil
}

// keySource is keys as a personal.KeySource: nil (no sealing) when nil.
func keySource(keys *personal.Keys) personal.KeySource {
	if keys == nil {
		return nil
	}
	return keys
}

// registryFor is the event registry, opening sealed events with sealer.
func registryFor(sealer *personal.Sealer) *events.Registry {
	if sealer == nil {
		return events.NewRegistry()
	}
	return sealer.Opening(events.NewRegistry())
}

// Service is a wired Lectern.
type Service struct {
	Handler *api.Server
	// Metrics serves the Prometheus exposition; it is not on the API's
	// address (lectern serve puts it on LECTERN_METRICS_ADDR).
	Metrics http.Handler
	// Commands are the write use cases; Identity is Commands.Identity.
	Commands *commands.Commands
	Identity *commands.Identity
	// Search searches knowledge documents.
	Search   *queries.KnowledgeSearch
	Listener *projections.Listener
	Runner   *projections.Runner
	// Downstream publishes classroom changes; it runs with the projections,
	// under its own runner (newDownstreamRunner).
	Downstream          *downstream.Forwarder
	newDownstreamRunner func() *projections.Runner
	pool                *pgxpool.Pool
	projPool            *pgxpool.Pool
	downPool            *pgxpool.Pool
	closeStore          func()
	janitor             *janitor.Janitor
	sessionLease        *authlease.Lease
	pingStore           func(context.Context) error // EventStoreDB's; nil on the PostgreSQL store
	keys                *personal.Keys              // nil: events in clear (the bench's build)
}

// VerifyDataKey refuses a master key of personal data that is not the
// database's (personal.Keys.Verify), and claims a database no key has
// claimed yet: a process runs it once migrated, before it serves.
func (s *Service) VerifyDataKey(ctx context.Context) error {
	if s.keys == nil {
		return nil
	}
	return s.keys.Verify(ctx)
}

// The names of the service's own pools' connections in pg_stat_activity
// (lectern serve names its main pool "lectern" unless DATABASE_URL names it).
const (
	ProjectionsApplicationName = "lectern projections"
	DownstreamApplicationName  = "lectern downstream"
)

// readyTimeout bounds each dependency's check in /readyz.
const readyTimeout = 2 * time.Second

// projectionPool is a pool for the projections whose commits do not wait for
// the WAL flush: a read model lost in a crash loses its offset with it (one
// transaction) and is rebuilt from the durable event log, so durability buys
// nothing there but latency.
// Its connections are named (application_name), so that pg_stat_activity
// tells them from the main pool's.
func projectionPool(main *pgxpool.Pool, size int32, name string) (*pgxpool.Pool, error) {
	cfg := main.Config().Copy()
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	cfg.ConnConfig.RuntimeParams["application_name"] = name
	cfg.MaxConns = size
	cfg.MinConns = 0
	return pgxpool.NewWithConfig(context.Background(), cfg)
}

// Close releases the service's own connections (not the caller's pool).
func (s *Service) Close() {
	_ = s.Downstream.Close()
	s.closeStore()
	s.projPool.Close()
	s.downPool.Close()
}

// Projections returns every read model's projection.
func Projections() []projections.Projection {
	ps := []projections.Projection{projections.Users(), projections.Agents()}
	ps = append(ps, projections.OrganisationProjections()...)
	ps = append(ps, projections.ClassroomProjections()...)
	ps = append(ps, projections.PracticeProjections()...)
	ps = append(ps, projections.SessionProjections()...)
	return mergeByName(append(ps, projections.KnowledgeProjections()...))
}

// mergeByName joins projections that share a consumer group into one.
func mergeByName(ps []projections.Projection) []projections.Projection {
	var out []projections.Projection
	at := map[string]int{}
	for _, p := range ps {
		if i, ok := at[p.Name]; ok {
			out[i].Handlers = append(out[i].Handlers, p.Handlers...)
			out[i].Tables = append(out[i].Tables, p.Tables...)
			out[i].Loaders = append(out[i].Loaders, p.Loaders...)
			out[i].Swapped = append(out[i].Swapped, p.Swapped...)
			continue
		}
		at[p.Name] = len(out)
		out = append(out, projections.Projection{Name: p.Name, Handlers: slices.Clone(p.Handlers), Tables: slices.Clone(p.Tables),
			Loaders: slices.Clone(p.Loaders), Swapped: slices.Clone(p.Swapped)})
	}
	return out
}

// UsesEventStoreDB reports whether an EVENTSTORE_URL selects EventStoreDB
// (esdb://... or esdb+discover://...) or PostgreSQL (empty). Anything else
// is an error, not a silent PostgreSQL: a mistyped URL must not send the
// events to another store.
func UsesEventStoreDB(url string) (bool, error) {
	switch {
	case url == "":
		return false, nil
	case strings.HasPrefix(url, "esdb://") || strings.HasPrefix(url, "esdb+discover://"):
		return true, nil
	}
	return false, fmt.Errorf("EVENTSTORE_URL: want an EventStoreDB connection string (esdb://host:2113?tls=false or esdb+discover://...), or nothing for the PostgreSQL store; got %q", url)
}

// openStore opens the event store cfg.EventStoreURL selects: EventStoreDB
// (esdb://...), or else the PostgreSQL store in cfg.Pool's database. Exactly
// one of the two is returned.
func openStore(ctx context.Context, cfg Config) (*esdb.Store, *postgres.Store, error) {
	useESDB, err := UsesEventStoreDB(cfg.EventStoreURL)
	if err != nil {
		return nil, nil, err
	}
	if useESDB {
		es, err := esdb.Open(ctx, cfg.EventStoreURL)
		if err != nil {
			return nil, nil, fmt.Errorf("EVENTSTORE_URL: %w", err)
		}
		return es, nil, nil
	}
	return nil, postgres.New(cfg.Pool, cfg.Now), nil
}

// New wires a service.
func New(cfg Config) (*Service, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Models == nil {
		cfg.Models = llm.DefaultCatalogue()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	keys, sealer, err := newSealer(cfg)
	if err != nil {
		return nil, err
	}
	registry := registryFor(sealer)
	listener := projections.NewListener(cfg.Pool, cfg.Logger)
	if keys != nil {
		// Another replica's erasure drops the key cached here at once.
		keys.FollowErasures(listener)
	}
	m := metrics.New()
	es, pg, err := openStore(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	var store eventstore.Store
	var closeStore func()
	if es != nil {
		// Before anything reads positions (Run refreshes them at once).
		listener.FollowESDB()
		store, closeStore = es, func() { _ = es.Close() }
	} else {
		pg.OnAppend(listener.WakeLocal)
		store, closeStore = pg, pg.Close
	}
	// Whether a document was recorded needs one event read, nothing opened.
	documentRecorded := blobs.RecordedIn(store)
	if sealer != nil {
		store = personal.NewStore(store, sealer)
	}
	store = metrics.CountingStore(store, m)
	reads := queries.New(cfg.Pool)
	if cfg.Embedder == nil {
		cfg.Embedder = knowledge.NewOffline()
	}
	search, err := queries.NewKnowledgeSearch(reads, cfg.Embedder)
	if err != nil {
		return nil, err
	}
	tokens, err := auth.NewTokens(cfg.JWTKey, auth.Clock(cfg.Now))
	if err != nil {
		return nil, err
	}
	limits := cfg.Limits
	if cfg.AddressLimit > 0 {
		limits.Address = ratelimit.Rate{N: cfg.AddressLimit, Per: commands.AddressWindow}
		limits.JoinAddress = ratelimit.Rate{N: cfg.AddressLimit, Per: time.Minute}
	}
	modelOptions := append(slices.Clip(cfg.ModelOptions), llm.WithObserver(m.ObserveModelResult))
	deps := commands.Deps{Store: store, Registry: registry, DB: cfg.Pool, Now: cfg.Now, IDs: commands.NewSequences(cfg.Pool), Observer: m,
		Reads: reads, Search: search, Gateway: llm.New(cfg.Models, modelOptions...), Embedder: cfg.Embedder,
		Blobs: blobs.New(cfg.Pool, keySource(keys)), Tokens: tokens, Mail: cfg.Mail, AdminEmails: cfg.AdminEmails,
		Limits: limits, Logger: cfg.Logger}
	if keys != nil { // a nil *personal.Keys would make a non-nil SubjectEraser
		deps.Keys = keys
	}
	cmds, err := commands.New(deps)
	if err != nil {
		return nil, err
	}
	projPool, err := projectionPool(cfg.Pool, 8, ProjectionsApplicationName)
	if err != nil {
		return nil, err
	}
	ps := Projections()
	for i := range ps {
		if slices.Contains(cfg.SkipPoison, ps[i].Name) {
			ps[i].OnPoison = projections.SkipPoison
		}
	}
	runner := projections.NewRunner(projPool, listener, registry, cfg.Logger, ps...)
	runner.Tracing = cfg.Tracing
	if es != nil {
		runner.Subscribers = projections.ESDBSubscribers(es, projPool, listener, cfg.Logger)
	}
	forwarder, err := downstream.New(downstream.Config{BrokerURL: cfg.BrokerURL, Topic: cfg.BrokerTopic, Retention: cfg.BrokerRetention, Logger: cfg.Logger})
	if err != nil {
		projPool.Close()
		return nil, err
	}
	// The forwarder is not one of Projections(): no write waits for it, a
	// replay does not republish, and its runner is restarted after a broker
	// outage instead of stalling. Its connections are its own, so that its
	// transactions never queue the read models' for a connection.
	downPool, err := projectionPool(cfg.Pool, 2, DownstreamApplicationName)
	if err != nil {
		projPool.Close()
		_ = forwarder.Close()
		return nil, err
	}
	newDownstreamRunner := func() *projections.Runner {
		r := projections.NewRunner(downPool, listener, registry, cfg.Logger, forwarder.Projection())
		r.Restarted = true // Forwarder.Run restarts it after a broker outage
		r.Tracing = cfg.Tracing
		if es != nil {
			r.Subscribers = projections.ESDBSubscribers(es, downPool, listener, cfg.Logger)
		}
		return r
	}
	statuses := func() []projections.Status { return append(runner.Statuses(), forwarder.Status()) }
	var lagDB metrics.Querier = cfg.Pool // the lag behind the PostgreSQL log
	if es != nil {
		lagDB = metrics.ESDBLag(es, cfg.Pool) // behind EventStoreDB's, past esdb_checkpoints
	}
	m.RegisterProjections(metrics.Projections(statuses, lagDB))
	m.RegisterDeadLetters(cfg.Pool) // in PostgreSQL whichever the event store
	m.RegisterPool("main", cfg.Pool)
	m.RegisterPool("projections", projPool)
	m.RegisterPool("downstream", downPool)
	s := &Service{Commands: cmds, Identity: cmds.Identity, Search: search, Listener: listener, Runner: runner, pool: cfg.Pool,
		projPool: projPool, downPool: downPool, closeStore: closeStore, Downstream: forwarder, newDownstreamRunner: newDownstreamRunner,
		keys: keys}
	if es != nil {
		s.pingStore = es.Ping
	}
	s.sessionLease = authlease.New(cfg.Pool, cfg.Logger)
	handler, err := api.New(api.Deps{
		Commands: cmds, Queries: reads, Search: search, Tokens: tokens,
		Listener: listener, Models: cfg.Models, DB: cfg.Pool, Logger: cfg.Logger, ConsistencyWait: cfg.ConsistencyWait,
		Extract: cfg.Extract, SkipSessionCheck: cfg.SkipSessionCheck, TrustedProxies: cfg.TrustedProxies, ForwardedHeader: cfg.ForwardedHeader, WriteWait: cfg.WriteWait, CORSOrigins: cfg.CORSOrigins, Ready: s.ready, Metrics: m,
		SessionLease: s.sessionLease, StreamHeartbeat: cfg.StreamHeartbeat, Tracing: cfg.Tracing,
		Writes: quota.New(ratelimit.New(cfg.Pool, cfg.Now), cfg.WriteBudget, cfg.Now),
	})
	if err != nil {
		return nil, err
	}
	s.Handler = handler
	s.Metrics = m.Handler()
	if s.janitor, err = janitor.New(cfg.Pool, ratelimit.New(cfg.Pool, cfg.Now), cfg.Now, cfg.Logger, m.Registry()); err != nil {
		return nil, err
	}
	s.janitor.DocumentRecorded = documentRecorded
	return s, nil
}

// ready: the database and EventStoreDB (where it is the store) answer, each
// within readyTimeout, and no projection is stalled.
func (s *Service) ready(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := s.pool.Ping(pctx); err != nil {
		return errors.New("database unreachable")
	}
	if s.pingStore != nil {
		if err := s.pingStore(pctx); err != nil {
			return errors.New("event store unreachable")
		}
	}
	var stalled []string
	for _, st := range s.Runner.Statuses() {
		switch {
		case st.Stalled && st.EventID != "":
			stalled = append(stalled, fmt.Sprintf("%s at event %s", st.Name, st.EventID))
		case st.Stalled:
			stalled = append(stalled, fmt.Sprintf("%s (%s)", st.Name, st.Error))
		}
	}
	if len(stalled) > 0 {
		return fmt.Errorf("projections stalled: %s (lectern projections dead-letters list)", strings.Join(stalled, ", "))
	}
	return nil
}

// RunBackground starts the listener and, when withProjections, the
// background work: projections, downstream forwarder and retention, janitor
// and the reindex worker. An HTTP-only replica (and a test's second service
// on a clock of its own) runs none of it, so that jobs are stamped by the
// instances that own them. The returned function stops it all and waits
// until every in-flight batch has finished.
func (s *Service) RunBackground(ctx context.Context, withProjections bool) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.Listener.Run(ctx) }()
	wg.Add(1)
	go func() { defer wg.Done(); s.sessionLease.Run(ctx) }()
	if withProjections {
		wg.Add(1)
		go func() { defer wg.Done(); s.Commands.KnowledgeJobs.RunJobs(ctx) }()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Runner.Run(ctx); err != nil {
				slog.Default().Error("projections stopped", "error", err)
			}
		}()
		wg.Add(1)
		go func() { defer wg.Done(); s.Downstream.Run(ctx, s.pool, s.newDownstreamRunner) }()
		wg.Add(1)
		go func() { defer wg.Done(); s.Downstream.RunRetention(ctx, s.pool) }()
		wg.Add(1)
		go func() { defer wg.Done(); s.janitor.Run(ctx) }()
	}
	return func() { cancel(); wg.Wait() }
}
