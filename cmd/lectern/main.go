// Command lectern serves the Lectern API and administers its database.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"os/signal"
	"os/user"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/trace"

	"lectern/api"
	"lectern/api/validation"
	"lectern/auth"
	"lectern/commands"
	"lectern/eventstore"
	"lectern/knowledge"
	"lectern/llm"
	"lectern/mail"
	"lectern/migrations"
	"lectern/personal"
	"lectern/ratelimit"
	"lectern/service"
	"lectern/tracing"
)

func main() {
	if err := root().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "lectern:", err)
		os.Exit(1)
	}
}

func root() *cobra.Command {
	cmd := &cobra.Command{
		Use:           "lectern",
		Short:         "Lectern: an event-sourced backend for AI practice classrooms",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.AddCommand(serveCmd(), migrateCmd(), usersCmd(), eventsCmd(), replayCmd(), projectionsCmd(), keysCmd(), healthcheckCmd())
	harden(cmd)
	return cmd
}

// harden makes every command below root refuse what it does not know, and
// keep secrets out of its errors: a group (keys, events, ...) given an
// unknown subcommand fails, as root does, instead of showing its help and
// exiting 0; and a password in a connection string, which several
// packages echo in their errors, is masked.
func harden(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c != root && c.HasSubCommands() && !c.Runnable() {
			c.Args = unknownSubcommand
			c.SuggestionsMinimumDistance = 2 // as root's
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
		if run := c.RunE; run != nil {
			c.RunE = func(cmd *cobra.Command, args []string) error { return redact(run(cmd, args)) }
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// unknownSubcommand is the Args of a group: no argument but a subcommand.
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return errors.New(msg)
}

// noArgs is the Args of a command that takes none: an argument is refused,
// not ignored (`serve --projections false` would run the projections).
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unexpected argument %q for %q", args[0], cmd.CommandPath())
	if args[0] == "true" || args[0] == "false" {
		msg += ` (a boolean flag takes its value after "=", as in --projections=false)`
	}
	return errors.New(msg)
}

// urlPassword is the password of a URL's user information
// (scheme://user:password@host), as connection strings carry it.
var urlPassword = regexp.MustCompile("([A-Za-z][A-Za-z0-9+.-]*://[^/?#@:\\s\"'`]*):[^\\s\"'`]*@")

// redactedError is an error whose message has its secrets masked.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redact masks in err's message the passwords of URLs (DATABASE_URL's
// driver masks its own; EVENTSTORE_URL's, LECTERN_BROKER_URL's and --to's
// are echoed by the packages that refuse them) and the values of the secret
// variables, should any appear.
func redact(err error) error {
	if err == nil {
		return nil
	}
	msg := urlPassword.ReplaceAllString(err.Error(), "${1}:xxxxx@")
	for _, name := range []string{"LECTERN_JWT_KEY", "LECTERN_DATA_KEY", "LECTERN_DATA_KEY_PREVIOUS", "LECTERN_USER_PASSWORD"} {
		if v := strings.TrimSpace(os.Getenv(name)); len(v) >= 8 {
			msg = strings.ReplaceAll(msg, v, "xxxxx")
		}
	}
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

// env is the process environment Lectern reads.
type env struct {
	DatabaseURL string
	Port        string
	JWTKey      string
	JWTKeyFile  string
	// DataKey and DataKeyFile: LECTERN_DATA_KEY (64 hex characters) or
	// LECTERN_DATA_KEY_FILE, the master key of personal data
	// (docs/privacy.md); make run's .data/data.key by default.
	DataKey     string
	DataKeyFile string
	// PreviousDataKey and PreviousDataKeyFile: LECTERN_DATA_KEY_PREVIOUS or
	// LECTERN_DATA_KEY_PREVIOUS_FILE, the master key being rotated away
	// from (docs/privacy.md); none outside a rotation.
	PreviousDataKey     string
	PreviousDataKeyFile string
	AdminEmails         []string
	LogLevel            slog.Level
	// BrokerURL and BrokerTopic: where classroom changes are published
	// (docs/subscribing.md).
	BrokerURL   string
	BrokerTopic string
	// BrokerRetention: LECTERN_BROKER_RETENTION, a Go duration (default
	// 168h; 0 keeps every published message).
	BrokerRetention time.Duration
	// Extract: LECTERN_MAX_EXTRACTED_BYTES (default 2 MiB of text per
	// document) and LECTERN_MAX_CHUNKS (default 5 000).
	Extract knowledge.ExtractLimits
	// TrustedProxies: LECTERN_TRUSTED_PROXIES, CIDRs or addresses of the
	// proxies whose forwarding headers name the client (default none).
	TrustedProxies []netip.Prefix
	// ForwardedHeader: LECTERN_FORWARDED_HEADER, the one header those
	// proxies name the client in: X-Forwarded-For (default) or Forwarded.
	ForwardedHeader string
	// CORSOrigins: LECTERN_CORS_ORIGINS, the browser origins allowed to
	// call the API.
	CORSOrigins []string
	// SkipPoison: LECTERN_SKIP_POISON, projections that pass over an event
	// they cannot apply instead of stopping.
	SkipPoison []string
	// TurnsPerMinute: LECTERN_TURNS_PER_MINUTE, each user's practice turns
	// a minute (default commands.DefaultTurnLimit).
	TurnsPerMinute int
	// UploadsPerMinute: LECTERN_UPLOADS_PER_MINUTE, each user's document
	// uploads a minute (default commands.DefaultUploadLimit).
	UploadsPerMinute int
	// WriteBytesPerDay: LECTERN_WRITE_BYTES_PER_DAY, each user's write
	// budget (default quota.DefaultRate).
	WriteBytesPerDay int
}

// positiveEnv reads the variable name as a positive number: ok when it is
// set, with an error saying it wants want when it is not such a number.
func positiveEnv(name, want string) (n int, ok bool, err error) {
	v := os.Getenv(name)
	if v == "" {
		return 0, false, nil
	}
	n, err = strconv.Atoi(v)
	if err != nil || n <= 0 {
		return n, true, fmt.Errorf("%s %q: want %s", name, v, want)
	}
	return n, true, nil
}

// readEnv reads the environment, with `make run`'s private cluster and
// signing key as defaults; needKey: a signing key is required (serve), else
// a command that issues no token runs without one.
func readEnv(needKey bool) (env, error) {
	e := env{
		Port:        os.Getenv("PORT"),
		JWTKey:      os.Getenv("LECTERN_JWT_KEY"),
		JWTKeyFile:  os.Getenv("LECTERN_JWT_KEY_FILE"),
		DataKey:     os.Getenv("LECTERN_DATA_KEY"),
		DataKeyFile: os.Getenv("LECTERN_DATA_KEY_FILE"),
		BrokerURL:   os.Getenv("LECTERN_BROKER_URL"),
		BrokerTopic: os.Getenv("LECTERN_BROKER_TOPIC"),

		PreviousDataKey:     os.Getenv("LECTERN_DATA_KEY_PREVIOUS"),
		PreviousDataKeyFile: os.Getenv("LECTERN_DATA_KEY_PREVIOUS_FILE"),
	}
	if e.Port == "" {
		e.Port = "8080"
	}
	for _, a := range strings.Split(os.Getenv("LECTERN_ADMIN_EMAILS"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			e.AdminEmails = append(e.AdminEmails, a)
		}
	}
	dbURL, err := databaseURL()
	e.DatabaseURL = dbURL
	if lvl := os.Getenv("LECTERN_LOG_LEVEL"); lvl != "" {
		if uerr := e.LogLevel.UnmarshalText([]byte(lvl)); uerr != nil {
			err = errors.Join(err, fmt.Errorf("LECTERN_LOG_LEVEL: %w", uerr))
		}
	}
	e.BrokerRetention = 7 * 24 * time.Hour
	if v := os.Getenv("LECTERN_BROKER_RETENTION"); v != "" {
		d, perr := time.ParseDuration(v)
		if perr != nil || d < 0 {
			err = errors.Join(err, fmt.Errorf("LECTERN_BROKER_RETENTION %q: want a duration such as 168h, or 0 to keep every message", v))
		}
		e.BrokerRetention = d
	}
	if n, ok, perr := positiveEnv("LECTERN_MAX_EXTRACTED_BYTES", "a positive number of bytes"); ok {
		e.Extract.MaxTextBytes, err = n, errors.Join(err, perr)
	}
	for _, name := range strings.Split(os.Getenv("LECTERN_SKIP_POISON"), ",") {
		if name = strings.TrimSpace(name); name != "" {
			e.SkipPoison = append(e.SkipPoison, name)
		}
	}
	origins, oerr := api.ParseCORSOrigins(os.Getenv("LECTERN_CORS_ORIGINS"))
	err = errors.Join(err, oerr)
	e.CORSOrigins = origins
	proxies, perr := api.ParseTrustedProxies(os.Getenv("LECTERN_TRUSTED_PROXIES"))
	err = errors.Join(err, perr)
	e.TrustedProxies = proxies
	header, herr := api.ParseForwardedHeader(os.Getenv("LECTERN_FORWARDED_HEADER"))
	err = errors.Join(err, herr)
	e.ForwardedHeader = header
	if n, ok, perr := positiveEnv("LECTERN_MAX_CHUNKS", "a positive number"); ok {
		e.Extract.MaxChunks, err = n, errors.Join(err, perr)
	}
	if n, ok, perr := positiveEnv("LECTERN_TURNS_PER_MINUTE", "a positive number"); ok {
		e.TurnsPerMinute, err = n, errors.Join(err, perr)
	}
	if n, ok, perr := positiveEnv("LECTERN_UPLOADS_PER_MINUTE", "a positive number"); ok {
		e.UploadsPerMinute, err = n, errors.Join(err, perr)
	}
	if n, ok, perr := positiveEnv("LECTERN_WRITE_BYTES_PER_DAY", "a positive number of bytes"); ok {
		e.WriteBytesPerDay, err = n, errors.Join(err, perr)
	}
	if e.JWTKey == "" && e.JWTKeyFile == "" {
		e.JWTKeyFile = defaultKeyFile()
	}
	if e.JWTKey == "" && e.JWTKeyFile == "" && needKey {
		err = errors.Join(err, errors.New("set LECTERN_JWT_KEY (64 hex characters) or LECTERN_JWT_KEY_FILE"))
	}
	if e.DataKey == "" && e.DataKeyFile == "" {
		e.DataKeyFile = defaultFile("data.key")
	}
	return e, err
}

// dataKeys are the master key of personal data, nil when none is
// configured, and, during a rotation, the previous one (nil outside one).
// During a rotation both must exist already: a current key made here, or
// on each replica, would open nothing the others wrote, and a previous one
// made here would open nothing at all. Nor does a command that only reads
// (export, replay, events seal) make one: a new key opens nothing, and a
// misspelt LECTERN_DATA_KEY_FILE would leave a stray master key behind.
func (e env) dataKeys() (key, previous []byte, err error) {
	return e.loadDataKeys(false)
}

// readDataKeys is dataKeys for a command that only reads personal data:
// the key file must exist.
func (e env) readDataKeys() (key, previous []byte, err error) {
	return e.loadDataKeys(true)
}

func (e env) loadDataKeys(reading bool) (key, previous []byte, err error) {
	previous, err = masterKey(e.PreviousDataKey, e.PreviousDataKeyFile, auth.LoadKey)
	if err != nil {
		return nil, nil, fmt.Errorf("LECTERN_DATA_KEY_PREVIOUS: %w", err)
	}
	load := auth.LoadOrCreateKey
	if previous != nil || reading {
		load = auth.LoadKey
	}
	if key, err = masterKey(e.DataKey, e.DataKeyFile, load); err != nil {
		return nil, nil, fmt.Errorf("data key: %w", err)
	}
	if previous != nil && key == nil {
		return nil, nil, errors.New("LECTERN_DATA_KEY_PREVIOUS is set, but not LECTERN_DATA_KEY or LECTERN_DATA_KEY_FILE: the key to rotate to")
	}
	return key, previous, nil
}

// masterKey is a 32-byte key given as hex, or in a file read by load; nil
// when neither is given.
func masterKey(hexKey, file string, load func(string) ([]byte, error)) ([]byte, error) {
	var key []byte
	var err error
	switch {
	case hexKey != "":
		// Not auth.DecodeKey: its errors speak of a signing key, and
		// quote the offending character of the key.
		if key, err = hex.DecodeString(strings.TrimSpace(hexKey)); err != nil {
			return nil, errors.New("not hex: the data key must be 64 hex characters (32 bytes)")
		}
	case file != "":
		key, err = load(file)
	default:
		return nil, nil
	}
	if err == nil && len(key) != 32 {
		err = fmt.Errorf("the data key must be 64 hex characters (32 bytes), not %d bytes", len(key))
	}
	return key, err
}

// key is the signing key; with none configured (a command that issues no
// token), a throwaway one.
func (e env) key() ([]byte, error) {
	switch {
	case e.JWTKey != "":
		return auth.DecodeKey(e.JWTKey)
	case e.JWTKeyFile != "":
		return auth.LoadOrCreateKey(e.JWTKeyFile)
	}
	key := make([]byte, auth.MinKeyLen)
	_, err := rand.Read(key)
	return key, err
}

func logger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// connect opens a pool on url whose statements tp traces (nil: none).
func connect(ctx context.Context, url string, tp trace.TracerProvider) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	// Unless DATABASE_URL sets pool_max_conns: two connections per core. More
	// requests than that wait for a connection rather than add PostgreSQL
	// processes competing for the same cores: measured with 32 clients on 2
	// cores, 20 connections gave the session list a p99 of 18-19 ms, 4 gave
	// 13-14 ms, and POST /agents ran no slower.
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = int32(max(4, 2*runtime.NumCPU()))
	}
	// Named in pg_stat_activity, unless DATABASE_URL names it.
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	if _, named := cfg.ConnConfig.RuntimeParams["application_name"]; !named {
		cfg.ConnConfig.RuntimeParams["application_name"] = "lectern"
	}
	tracing.InstrumentPool(cfg, tp)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("database unreachable: %w", err)
	}
	return pool, nil
}

// connectEnv connects to DATABASE_URL, for the commands that need only the
// database. They do not migrate it: one not at this binary's latest
// migration is refused (migrations.Check).
func connectEnv(ctx context.Context) (*pgxpool.Pool, error) {
	pool, err := connectEnvUnchecked(ctx)
	if err != nil {
		return nil, err
	}
	if err := migrations.Check(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// connectEnvUnchecked is connectEnv for `migrate`, whatever migration the
// database is at.
func connectEnvUnchecked(ctx context.Context) (*pgxpool.Pool, error) {
	url, err := databaseURL()
	if err != nil {
		return nil, err
	}
	return connect(ctx, url, nil)
}

// build wires the service the environment describes, traced by tp (nil:
// untraced).
func build(ctx context.Context, e env, log *slog.Logger, tp trace.TracerProvider) (*service.Service, *pgxpool.Pool, error) {
	key, err := e.key()
	if err != nil {
		return nil, nil, err
	}
	sender, err := mail.FromEnv(os.Getenv, log)
	if err != nil {
		return nil, nil, err
	}
	pool, err := connect(ctx, e.DatabaseURL, tp)
	if err != nil {
		return nil, nil, err
	}
	models, err := llm.Load(os.Getenv(llm.EnvModelsFile))
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	embedder, err := knowledge.FromEnv(os.Getenv)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	skipSessionCheck := benchSkipSessionCheck(log) // false but in the bench's build
	// A service appends personal data: it never runs without the key.
	dataKey, previous, err := e.dataKeys()
	if benchClearEvents(log) {
		dataKey, previous = nil, nil // the bench's build measuring what sealing costs
	} else if err == nil && dataKey == nil {
		err = errors.New("data key: set LECTERN_DATA_KEY (64 hex characters) or LECTERN_DATA_KEY_FILE (make run makes .data/data.key)")
	}
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	if dataKey != nil {
		attrs := []any{"key_id", personal.KeyID(dataKey)}
		if previous != nil {
			attrs = append(attrs, "previous_key_id", personal.KeyID(previous))
		}
		log.Info("master key of personal data", attrs...)
	}
	svc, err := service.New(service.Config{Pool: pool, JWTKey: key, DataKey: dataKey, PreviousDataKey: previous,
		AdminEmails: e.AdminEmails, Mail: sender, Logger: log,
		Models: models, Embedder: embedder, EventStoreURL: os.Getenv("EVENTSTORE_URL"), Extract: e.Extract,
		SkipSessionCheck: skipSessionCheck, TrustedProxies: e.TrustedProxies, ForwardedHeader: e.ForwardedHeader, CORSOrigins: e.CORSOrigins,
		BrokerURL: e.BrokerURL, BrokerTopic: e.BrokerTopic, BrokerRetention: e.BrokerRetention, SkipPoison: e.SkipPoison,
		Limits: commands.Limits{Turns: ratelimit.Rate{N: e.TurnsPerMinute, Per: time.Minute},
			Uploads: ratelimit.Rate{N: e.UploadsPerMinute, Per: time.Minute}},
		WriteBudget: ratelimit.Rate{N: e.WriteBytesPerDay, Per: 24 * time.Hour}, Tracing: tp})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return svc, pool, nil
}

func serveCmd() *cobra.Command {
	var migrate, withProjections bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the HTTP API and run the projections",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := readEnv(true)
			if err != nil {
				return err
			}
			log := logger(e.LogLevel)
			slog.SetDefault(log)
			ctx, stopSignals := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stopSignals()

			// OTEL_* variables; nothing is set up (and nothing traced)
			// without them.
			tp, shutdownTracing, err := tracing.Setup(ctx)
			if err != nil {
				return err
			}
			defer func() {
				// Last: the spans of the requests and projections that
				// finished during the shutdown are flushed too.
				flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := shutdownTracing(flushCtx); err != nil {
					log.Warn("flushing traces", "error", err)
				}
			}()
			if tp != nil {
				log.Info("tracing on")
			}
			svc, pool, err := build(ctx, e, log, tp)
			if err != nil {
				return err
			}
			defer pool.Close()
			defer svc.Close()
			schema := migrations.Check // --migrate=false: the database must be migrated already
			if migrate {
				schema = migrations.Up // which checks too
			}
			if err := schema(ctx, pool); err != nil {
				return err
			}
			if err := svc.VerifyDataKey(ctx); err != nil {
				return err
			}
			srv := &http.Server{
				Addr:              net.JoinHostPort("", e.Port),
				Handler:           svc.Handler,
				ReadHeaderTimeout: 5 * time.Second,
				ReadTimeout:       30 * time.Second,
				WriteTimeout:      120 * time.Second, // a streamed turn moves its own deadline on at each event (api/stream.go)
				IdleTimeout:       120 * time.Second,
				ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
			}
			// The port first: one that is taken (or no port) is an error
			// before anything says it serves or a projection starts.
			ln, err := net.Listen("tcp", srv.Addr)
			if err != nil {
				return err
			}
			stopBackground := svc.RunBackground(context.WithoutCancel(ctx), withProjections)
			if addr := os.Getenv("LECTERN_PPROF_ADDR"); addr != "" {
				// Profiling on its own (private) address, never on the API's.
				go func() {
					log.Warn("pprof listening", "addr", addr, "error", http.ListenAndServe(addr, pprofMux()))
				}()
			}
			if addr := os.Getenv("LECTERN_METRICS_ADDR"); addr != "" {
				// Metrics on a private address: they describe the service's
				// traffic and are nobody else's business.
				go func() {
					metricsMux := http.NewServeMux()
					metricsMux.Handle("GET /metrics", svc.Metrics)
					msrv := &http.Server{Addr: addr, Handler: metricsMux, ReadHeaderTimeout: 5 * time.Second}
					log.Warn("metrics listening", "addr", addr, "error", msrv.ListenAndServe())
				}()
			}
			errc := make(chan error, 1)
			go func() { errc <- srv.Serve(ln) }()
			log.Info("lectern serving", "addr", srv.Addr, "projections", withProjections)

			select {
			case err := <-errc:
				stopBackground()
				return err
			case <-ctx.Done():
			}
			// Accepted writes run to their end (or their bound): a shutdown
			// that cut a practice turn short would leave its models paid
			// for and its answer lost. An orchestrator's grace period
			// (Kubernetes' terminationGracePeriodSeconds) must be as long.
			grace := svc.Handler.LongestWrite()
			log.Info("shutting down: finishing in-flight requests", "grace", grace.String())
			shutdownCtx, cancel := context.WithTimeout(context.Background(), grace)
			defer cancel()
			if err := srv.Shutdown(shutdownCtx); err != nil {
				log.Error("shutdown", "error", err)
			}
			// Requests first (they may wait on projections), then the projections.
			stopBackground()
			log.Info("stopped")
			return nil
		},
	}
	cmd.Flags().BoolVar(&migrate, "migrate", true, "apply pending migrations before serving")
	cmd.Flags().BoolVar(&withProjections, "projections", true, "run the projections and background workers (reindex jobs, forwarder, janitor) in this process")
	return cmd
}

func migrateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Apply pending database migrations",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pool, err := connectEnvUnchecked(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			if err := migrations.Up(cmd.Context(), pool); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "migrations applied")
			return nil
		},
	}
}

func usersCmd() *cobra.Command {
	users := &cobra.Command{Use: "users", Short: "Manage user accounts"}
	var email, name, password string
	var admin bool
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a user (with --admin: an administrator; an existing user is made admin)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if email == "" || name == "" {
				return errors.New("--email and --name are required")
			}
			if password == "" {
				password = os.Getenv("LECTERN_USER_PASSWORD")
			}
			if len(password) < 8 {
				return errors.New("a password of at least 8 characters is required (--password or LECTERN_USER_PASSWORD)")
			}
			// What sign-up and login accept: an account they would refuse
			// could never log in.
			vals, verrs := newUserBody.Validate(nil, map[string]any{"email": email, "password": password, "name": name})
			if len(verrs) > 0 {
				return fmt.Errorf("users create: %w", verrs)
			}
			if normalized, ok := vals.String("email"); ok {
				email = normalized
			}
			e, err := readEnv(false)
			if err != nil {
				return err
			}
			log := logger(e.LogLevel)
			svc, pool, err := build(cmd.Context(), e, log, nil)
			if err != nil {
				return err
			}
			defer pool.Close()
			defer svc.Close()
			if err := migrations.Up(cmd.Context(), pool); err != nil {
				return err
			}
			if err := svc.VerifyDataKey(cmd.Context()); err != nil {
				return err
			}
			ctx := commands.WithMetadata(cmd.Context(), eventstore.Metadata{
				CorrelationID: uuid.NewString(), Actor: cliActor("users create")})
			user, _, err := svc.Identity.CreateUser(ctx, email, password, name, admin)
			if err != nil && admin {
				// The account exists: grant it the admin role instead.
				existing, lerr := svc.Identity.UserByEmail(cmd.Context(), email)
				if lerr != nil {
					return err
				}
				if user, _, err = svc.Identity.GrantRole(ctx, existing.ID, "admin"); err != nil {
					return err
				}
			} else if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "user %d %s roles=%s\n", user.ID, user.Email, strings.Join(user.Roles, ","))
			return nil
		},
	}
	create.Flags().StringVar(&email, "email", "", "e-mail address")
	create.Flags().StringVar(&name, "name", "", "display name")
	create.Flags().StringVar(&password, "password", "", "password (or LECTERN_USER_PASSWORD)")
	create.Flags().BoolVar(&admin, "admin", false, "make the user an administrator")
	users.AddCommand(create)
	return users
}

// newUserBody is what POST /user/signup accepts of an account (api's
// signupBody; login takes passwords up to the same 128 characters), for
// `users create`: --email, --password and --name as flags.
var newUserBody = validation.Schema{Fields: []validation.Field{
	{Name: "email", Kind: validation.Email, Required: true},
	{Name: "password", Kind: validation.String, Required: true, MinLength: 8, MaxLength: 128},
	{Name: "name", Kind: validation.String, Required: true, MinLength: 1, MaxLength: 200},
}}

func pprofMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// cliActor names an operator's command in event metadata: the command and
// the account that ran it.
func cliActor(command string) string {
	who := "unknown"
	if u, err := user.Current(); err == nil {
		who = u.Username
	}
	return "cli:" + command + " by " + who
}
