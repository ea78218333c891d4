// Package api is Lectern's HTTP edge: routing, authentication, request
// decoding and validation, and error rendering. It holds no business rules.
package api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"lectern/api/validation"
	"lectern/auth"
	"lectern/commands"
	"lectern/derrors"
	"lectern/eventstore"
	"lectern/knowledge"
	"lectern/llm"
	"lectern/metrics"
	"lectern/projections"
	"lectern/queries"
	"lectern/quota"
)

// Deps are the application the HTTP edge serves.
type Deps struct {
	Commands *commands.Commands
	Queries  *queries.DB
	// Search searches knowledge documents.
	Search   *queries.KnowledgeSearch
	Tokens   *auth.Tokens
	Listener *projections.Listener
	Models   *llm.Catalogue
	DB       *pgxpool.Pool
	Logger   *slog.Logger
	// ConsistencyWait bounds how long a write waits for its read models.
	ConsistencyWait time.Duration
	// WriteWait bounds a write (DefaultWriteWait when zero): past it, its
	// work stops and the answer is a 503. A practice turn has the longest
	// its models may take on top.
	WriteWait time.Duration
	// Ready reports whether the service can serve (readiness probe).
	Ready func(ctx context.Context) error
	// CORSOrigins are the browser origins (scheme://host[:port], or "*")
	// allowed to call the API from their pages (LECTERN_CORS_ORIGINS); none
	// by default, and then a browser's preflight is answered 405.
	CORSOrigins []string
	// TrustedProxies are the proxies whose forwarding header names the
	// client (LECTERN_TRUSTED_PROXIES); none by default.
	TrustedProxies []netip.Prefix
	// ForwardedHeader is the one header those proxies name the client in
	// (LECTERN_FORWARDED_HEADER): HeaderXForwardedFor (the default, when
	// empty) or HeaderForwarded.
	ForwardedHeader string
	// SkipSessionCheck makes authentication trust the token alone (its roles,
	// and no check that its session is open). For the bench's measurement of
	// the check's cost only (LECTERN_BENCH_SKIP_SESSION_CHECK); never in
	// production: a logged-out token then works until it expires.
	SkipSessionCheck bool
	// SessionLease, if set, lets session checks be answered from memory
	// while it is held (authlease.Lease); nil: every check asks the
	// database.
	SessionLease SessionLease
	// Extract bounds what extracting an uploaded document may cost (zero:
	// knowledge.DefaultExtractLimits).
	Extract knowledge.ExtractLimits
	// Metrics, if set, counts requests. Its exposition is served apart from
	// the API (service.Service.Metrics), never on the API's address.
	Metrics *metrics.Metrics
	// StreamHeartbeat is how often an idle streamed turn sends a heartbeat
	// (0: DefaultStreamHeartbeat).
	StreamHeartbeat time.Duration
	// Tracing, if set, traces each request with a server span named by its
	// route (nil: tracing off, and no span is started).
	Tracing trace.TracerProvider
	// Writes, if set, is each user's budget of bytes their writes record
	// (nil: none).
	Writes *quota.Budget
}

// Validate reports every missing dependency.
func (d Deps) Validate() error {
	var err error
	for name, missing := range map[string]bool{
		"commands": d.Commands == nil, "queries": d.Queries == nil, "search": d.Search == nil,
		"tokens": d.Tokens == nil, "listener": d.Listener == nil, "db": d.DB == nil, "logger": d.Logger == nil,
		"models": d.Models == nil, "sessions": d.Commands != nil && d.Commands.Sessions == nil,
	} {
		if missing {
			err = errors.Join(err, errors.New("api: missing "+name))
		}
	}
	return err
}

// Server serves the API.
type Server struct {
	deps     Deps
	sessions *sessionChecks
	ops      []operation
	handler  http.Handler
}

// New builds the router.
func New(deps Deps) (*Server, error) {
	if err := deps.Validate(); err != nil {
		return nil, err
	}
	if deps.ConsistencyWait == 0 {
		deps.ConsistencyWait = 2 * time.Second
	}
	s := &Server{deps: deps, sessions: &sessionChecks{db: deps.DB, lease: deps.SessionLease}}
	s.ops = s.operations()
	declareKeyAnswers(s.ops)
	if deps.Writes != nil {
		declareBudgetAnswers(s.ops)
	}
	if err := resolveLocations(s.ops, allComponents()); err != nil {
		return nil, err
	}

	r := chi.NewRouter()
	// Metrics outermost, so it records the 500 accessLog writes on a panic.
	if deps.Metrics != nil {
		r.Use(deps.Metrics.Middleware)
	}
	// The request id before CORS: a preflight, which CORS answers itself,
	// has one too.
	r.Use(withRequestID)
	if len(deps.CORSOrigins) > 0 {
		r.Use(corsMiddleware(deps.CORSOrigins))
	}
	if deps.Tracing != nil {
		// Inside withRequestID, whose id the span records; outside
		// accessLog, which turns a panic into the 500 the span records.
		r.Use(traced(deps.Tracing))
	}
	// HEAD is answered wherever GET is (RFC 9110 §9.3.2): the GET handler
	// runs and net/http drops its body.
	r.Use(accessLog(deps.Logger), limitBody, middleware.GetHead)
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) { writeDetail(w, http.StatusNotFound, "Not Found") })
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		// A custom 405 handler does not get chi's Allow header: rebuild it.
		var allowed []string
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			if r.Match(chi.NewRouteContext(), m, req.URL.Path) {
				allowed = append(allowed, m)
				if m == http.MethodGet {
					allowed = append(allowed, http.MethodHead)
				}
			}
		}
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		writeDetail(w, http.StatusMethodNotAllowed, "Method Not Allowed")
	})
	for _, op := range s.ops {
		r.Method(op.method, op.path, s.serve(op))
	}
	doc, err := s.openAPI()
	if err != nil {
		return nil, err
	}
	r.Get("/openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
	})
	r.Mount("/docs", docsHandler())
	appRoutes(r)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", s.readyz)
	s.handler = r
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Router exposes the chi router (tests match requests to route patterns).
func (s *Server) Router() chi.Router { return s.handler.(chi.Router) }

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.deps.Ready != nil {
		if err := s.deps.Ready(r.Context()); err != nil {
			writeDetail(w, http.StatusServiceUnavailable, err.Error())
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// input is a validated request.
type input struct {
	path, query, body validation.Values
	user              *Principal
}

// operation is one route with everything needed to serve and document it.
type operation struct {
	method, path     string
	id, summary, tag string
	auth             bool
	pathParams       []validation.Field
	query            []validation.Field
	body             *validation.Schema
	// ownBody is a body the handler reads itself (JSON, or a form that
	// uploads a file); it is documented as JSON and as multipart/form-data.
	ownBody    *validation.Schema
	status     int    // success status
	response   string // component schema of the success body; "" for none
	errors     []int  // documented error statuses besides 422
	idempotent bool   // honours Idempotency-Key
	// positioned: a public write that answers with its events' position
	// (X-Event-Position), as every authenticated write does.
	positioned bool
	// unmetered: an authenticated write that does not draw on the caller's
	// write budget: it stores nothing the caller typed (a search), or it
	// must work once the budget is spent (erasure, a password change).
	unmetered bool
	handle    func(w http.ResponseWriter, r *http.Request, in input) error

	// location, on a 201, names the GET that reads what it created
	// (locatedBy); locationPath is that GET's path, set by New.
	location     *locatedBy
	locationPath string
}

// serve authenticates, validates path, query and body together (every error
// at once, as FastAPI does), then runs the handler and renders its error.
func (s *Server) serve(op operation) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in input
		if op.auth {
			p, err := s.authenticate(r)
			if err != nil {
				writeError(w, r, s.deps.Logger, err)
				return
			}
			in.user = p
		}
		if err := checkMinPosition(r, op); err != nil {
			writeError(w, r, s.deps.Logger, err)
			return
		}
		keyed := op.idempotent && in.user != nil && r.Header.Get("Idempotency-Key") != ""
		var meter *commands.Meter
		admit := func() error { return nil }
		if s.metered(op) {
			admit = func() error { return s.admitWrite(r.Context(), op, in.user.UserID) }
			// A write under an Idempotency-Key is admitted once it is
			// known to run: a retry of one recorded gets its answer.
			if !keyed {
				if err := admit(); err != nil {
					writeError(w, r, s.deps.Logger, err)
					return
				}
			}
			meter = &commands.Meter{}
			// What the write records is charged, whatever its outcome.
			defer func() { s.spendWrite(r.Context(), in.user.UserID, meter.Bytes()) }()
		}
		var errs validation.Errors
		if len(op.pathParams) > 0 {
			raw := map[string]string{}
			for _, f := range op.pathParams {
				raw[f.Name] = chi.URLParam(r, f.Name)
			}
			v, e := validation.Path(raw, op.pathParams...)
			in.path, errs = v, append(errs, e...)
		}
		if len(op.query) > 0 {
			v, e := validation.Query(r.URL.Query(), op.query...)
			in.query, errs = v, append(errs, e...)
		}
		var body []byte
		if op.body != nil {
			var err error
			body, err = readBody(r.Body)
			if err != nil {
				writeError(w, r, s.deps.Logger, err)
				return
			}
			if trimmed := bytes.TrimSpace(body); len(trimmed) == 0 || string(trimmed) == "null" {
				// The body itself is required, even where none of its fields are.
				errs = append(errs, validation.MissingBody())
			} else {
				v, e := validation.DecodeBody(body, *op.body)
				in.body, errs = v, append(errs, e...)
			}
		}
		if op.ownBody != nil && keyed {
			// The handler reads its own body, and the key's record needs
			// it too: read once, kept for both.
			raw, err := readBody(r.Body)
			if err != nil {
				writeError(w, r, s.deps.Logger, err)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(raw))
			body = sameAcrossRetries(r.Header.Get("Content-Type"), raw)
		}
		if len(errs) > 0 {
			writeError(w, r, s.deps.Logger, errs)
			return
		}
		// The request caused the events; a caller's X-Correlation-ID ties them
		// to a wider conversation.
		meta := eventstore.Metadata{RequestID: requestID(r.Context()), CorrelationID: correlationID(r),
			CausationID: "request:" + requestID(r.Context())}
		if in.user != nil {
			meta.UserID = in.user.UserID
		}
		ctx := commands.WithMetadata(r.Context(), meta)
		if meter != nil {
			ctx = commands.WithMeter(ctx, meter)
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			// An accepted write runs to its end even if its client goes away:
			// cut short, it could leave its client unsure whether it happened
			// and its Idempotency-Key in progress. Its own bound ends it, so
			// that a stalled database (a lock held, a commit that does not
			// return) answers 503 rather than holding the request and its
			// connection for as long as the stall lasts; an Idempotency-Key
			// keeps what it may have written.
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), s.writeBound(op.id))
			defer cancel()
		}
		r = r.WithContext(ctx)
		handle := func(ctx context.Context, w http.ResponseWriter) error {
			if op.locationPath != "" {
				lw := &locationWriter{ResponseWriter: w, op: op, r: r, in: in}
				defer lw.release()
				w = lw
			}
			return op.handle(w, r.WithContext(ctx), in)
		}
		var err error
		if keyed {
			err = s.idempotently(w, r, in.user.UserID, body, admit, handle)
		} else {
			err = handle(ctx, w)
		}
		if err != nil {
			writeError(w, r, s.deps.Logger, err)
		}
	})
}

// sameAcrossRetries is what an Idempotency-Key's record keeps of a body the
// handler reads itself: the body, but a form's boundary, which a client
// draws afresh for each request (curl, browsers), so that a retry of the
// same upload is the same request.
func sameAcrossRetries(contentType string, body []byte) []byte {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return body
	}
	return bytes.ReplaceAll(body, []byte("--"+params["boundary"]), []byte("--boundary"))
}

func correlationID(r *http.Request) string {
	if id := r.Header.Get("X-Correlation-ID"); safeRequestID.MatchString(id) {
		return id
	}
	return requestID(r.Context())
}

// LongestWrite is the longest an accepted write may run: a practice turn's
// bound. A shutdown that waits as long lets every accepted write end.
func (s *Server) LongestWrite() time.Duration { return s.writeBound("run_practice_session") }

// DefaultWriteWait is Deps.WriteWait's default: what a write does, a
// practice turn's reads, append and wait for its read models besides its
// models' calls.
const DefaultWriteWait = time.Minute

// writeBound bounds a write: WriteWait, and for a practice turn the longest
// its models may take on top.
func (s *Server) writeBound(opID string) time.Duration {
	bound := s.deps.WriteWait
	if bound <= 0 {
		bound = DefaultWriteWait
	}
	if streamedTurns[opID] && s.deps.Models != nil {
		bound += s.deps.Models.LongestCall()
	}
	return bound
}

// settle sets X-Event-Position and waits, within the consistency bound, for
// the projections that serve the written resource's reads; on time-out the
// write stands and the response says X-Projection-Pending.
func (s *Server) settle(w http.ResponseWriter, r *http.Request, res commands.Result, projections ...string) {
	if res.Position.IsZero() {
		return
	}
	w.Header().Set("X-Event-Position", res.Position.String())
	ctx, cancel := context.WithTimeout(r.Context(), s.deps.ConsistencyWait)
	defer cancel()
	if err := s.deps.Listener.WaitFor(ctx, res.Position, projections...); err != nil {
		w.Header().Set("X-Projection-Pending", "true")
	}
}

// awaitMinPosition honours a read's X-Min-Position header.
func (s *Server) awaitMinPosition(w http.ResponseWriter, r *http.Request, projections ...string) error {
	h := r.Header.Get("X-Min-Position")
	if h == "" {
		return nil
	}
	pos, err := eventstore.ParsePosition(h)
	if err != nil {
		return errBadMinPosition
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.deps.ConsistencyWait)
	defer cancel()
	if err := s.deps.Listener.WaitFor(ctx, pos, projections...); err != nil {
		w.Header().Set("X-Projection-Pending", "true")
	}
	return nil
}

// checkMinPosition refuses an unreadable X-Min-Position on every
// authenticated read, as the document says, before the handler runs: the
// handlers that serve read models wait for it (awaitMinPosition); the
// others (the catalogue, the event log itself) have nothing to wait for.
func checkMinPosition(r *http.Request, op operation) error {
	h := r.Header.Get("X-Min-Position")
	if !op.auth || (r.Method != http.MethodGet && r.Method != http.MethodHead) || h == "" {
		return nil
	}
	if _, err := eventstore.ParsePosition(h); err != nil {
		return errBadMinPosition
	}
	return nil
}

var errBadMinPosition = derrors.New(derrors.ErrBadRequest, "Invalid X-Min-Position header")

func isNotFound(err error) bool { return errors.Is(err, derrors.ErrNotFound) }
