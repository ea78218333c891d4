package api

import (
	"context"
	"log/slog"
	"net/http"
	"regexp"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

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
					if p == http.ErrAbortHandler {
						panic(p)
					}
					logger.Error("panic", "panic", p, "stack", string(debug.Stack()), "request_id", requestID(r.Context()))
					if rec.status == 0 {
						writeDetail(rec, http.StatusInternalServerError, "Internal Server Error")
					}
				}
				route := chi.RouteContext(r.Context()).RoutePattern()
				logger.LogAttrs(r.Context(), slog.LevelInfo, "http",
					slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("route", route),
					slog.Int("status", rec.status), slog.Int("bytes", rec.bytes),
					slog.Float64("ms", float64(time.Since(start).Microseconds())/1000),
					slog.String("request_id", requestID(r.Context())))
			}()
			next.ServeHTTP(rec, r)
		})
	}
}

// limitBody makes reading more than MaxBodyBytes fail (413).
func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > MaxBodyBytes {
			writeDetail(w, http.StatusRequestEntityTooLarge, "Request body too large")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
		next.ServeHTTP(w, r)
	})
}

// Principal is the authenticated caller.
type Principal struct {
	UserID int64
	Roles  []string
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

// authenticate resolves the bearer token to a principal. Roles come from the
// token, so a granted role takes effect with the next token (a refresh, at
// most 15 minutes later); this keeps a database round trip off every request.
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
	return &Principal{UserID: claims.UserID, Roles: claims.Roles}, nil
}
