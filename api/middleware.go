package api

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"lectern/derrors"
)

// MaxBodyBytes bounds every request body (413 beyond).
const MaxBodyBytes = 1 << 20

type ctxKey int

const (
	requestIDKey ctxKey = iota
)

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

var safeRequestID = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// withRequestID takes the caller's X-Request-ID when it is safe to log, or
// makes one, and echoes it.
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-ID")
		if !safeRequestID.MatchString(id) {
			id = uuid.NewString()
		}
		w.Header().Set("X-Request-ID", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey, id)))
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += n
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// accessLog writes one JSON line per request and turns panics into 500s.
func accessLog(logger *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			rec := &statusRecorder{ResponseWriter: w}
			defer func() {
				if p := recover(); p != nil {
					if err, ok := p.(error); ok && errors.Is(err, http.ErrAbortHandler) {
						panic(p)
					}
					logger.Error("panic", "panic", p, "stack", string(debug.Stack()), "request_id", requestID(r.Context()))
					if rec.status == 0 {
						writeDetail(rec, http.StatusInternalServerError, "Internal Server Error")
					}
				}
				route := chi.RouteContext(r.Context()).RoutePattern()
				attrs := []slog.Attr{
					slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("route", route),
					slog.Int("status", rec.status), slog.Int("bytes", rec.bytes),
					slog.Float64("ms", float64(time.Since(start).Microseconds())/1000),
					slog.String("request_id", requestID(r.Context())),
				}
				if sc := trace.SpanContextFromContext(r.Context()); sc.IsValid() {
					// The request's trace, to find it from its log line.
					attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()))
				}
				logger.LogAttrs(r.Context(), slog.LevelInfo, "http", attrs...)
			}()
			next.ServeHTTP(rec, r)
		})
	}
}

// Bounds on reading a refused body (see limitBody).
const (
	// DrainBytes is how much of a refused body is read and discarded, so
	// that a client that writes its whole request before it reads the answer
	// (Python's urllib and requests do) sees the 413 instead of a reset.
	DrainBytes = 8 << 20
	// DrainTimeout bounds the time spent discarding it.
	DrainTimeout = 5 * time.Second
)

// limitBody makes reading more than MaxBodyBytes fail (413). A body that is
// refused is read and discarded, within DrainBytes and DrainTimeout, before
// the connection closes: closing a socket with unread data sends a reset,
// and a client still writing its body then never reads the 413.
func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := r.Body
		if r.ContentLength > MaxBodyBytes {
			w.Header().Set("Connection", "close")
			writeDetail(w, http.StatusRequestEntityTooLarge, "Request body too large")
			drain(w, body)
			return
		}
		limited := &limitedBody{ReadCloser: http.MaxBytesReader(w, body, MaxBodyBytes)}
		r.Body = limited
		next.ServeHTTP(w, r)
		if limited.overflowed {
			drain(w, body)
		}
	})
}

// limitedBody remembers that its reader went past the limit.
type limitedBody struct {
	io.ReadCloser
	overflowed bool
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		b.overflowed = true
	}
	return n, err
}

// drain reads and discards what is left of a refused body, within bounds.
func drain(w http.ResponseWriter, body io.Reader) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(DrainTimeout))
	_, _ = io.Copy(io.Discard, io.LimitReader(body, DrainBytes))
}

// bodyError is a failure to read the request body that is the client's:
// it stopped sending (a truncated body, the connection closed) or sent too
// slowly (the server's read deadline passed).
type bodyError struct{ err error }

func (e *bodyError) Error() string { return "reading the request body: " + e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// readBody reads the whole request body. Read failures other than a body
// over the limit are the client's (bodyError): the only reader is the
// client's connection.
func readBody(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, err
		}
		return nil, &bodyError{err: err}
	}
	return b, nil
}

// clientGone reports whether the request failed because its client went
// away: nginx's 499, logged as the client's doing, not the server's.
func clientGone(r *http.Request, err error) bool {
	return errors.Is(err, context.Canceled) && errors.Is(r.Context().Err(), context.Canceled)
}

// StatusClientClosedRequest is nginx's status for a request whose client
// closed the connection before the answer.
const StatusClientClosedRequest = 499

// Principal is the authenticated caller.
type Principal struct {
	UserID int64
	Roles  []string
	// Session is the login session (refresh-token family) of the caller's
	// access token; uuid.Nil when the token names none.
	Session uuid.UUID
}

// HasRole reports whether the caller holds role.
func (p *Principal) HasRole(role string) bool {
	for _, r := range p.Roles {
		if r == role {
			return true
		}
	}
	return false
}

var (
	errNoCredentials  = derrors.New(derrors.ErrUnauthenticated, "Not authenticated")
	errBadCredentials = derrors.New(derrors.ErrUnauthenticated, "Could not validate credentials")
)

// authenticate resolves the bearer token to a principal. The token proves
// who the caller is; whether its session is still open and which roles the
// user holds are the database's as of the request (sessionChecks: asked in
// one indexed round trip shared by the requests that arrive together, or
// remembered under a session lease that no change of them commits under),
// so that a logout, a revoked session or a role granted or withdrawn counts
// from the next request, on every replica
// (TestRoleChangesCountFromTheNextRequest).
func (s *Server) authenticate(r *http.Request) (*Principal, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil, errNoCredentials
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(token) == "" {
		return nil, errNoCredentials
	}
	claims, err := s.deps.Tokens.ParseAccess(strings.TrimSpace(token))
	if err != nil {
		return nil, errBadCredentials
	}
	if s.deps.SkipSessionCheck {
		session, _ := uuid.Parse(claims.Session) // uuid.Nil if none
		return &Principal{UserID: claims.UserID, Roles: claims.Roles, Session: session}, nil
	}
	session, err := uuid.Parse(claims.Session)
	if err != nil {
		// Every token Lectern issues at login names its session.
		return nil, errBadCredentials
	}
	q, err := s.sessions.check(r.Context(), claims.UserID, session)
	if err != nil {
		return nil, err
	}
	roles, known, revoked := q.roles, q.known, q.revoked
	if revoked {
		return nil, errBadCredentials
	}
	if !known {
		// The users read model has not caught up with a sign-up yet: the
		// roles the token was issued with are the user's.
		roles = claims.Roles
	}
	// Clipped: an answer may be remembered and shared by later requests.
	return &Principal{UserID: claims.UserID, Roles: slices.Clip(roles), Session: session}, nil
}
