package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"lectern/aggregates"
	"lectern/api/validation"
	"lectern/derrors"
	"lectern/eventstore"
	"lectern/knowledge"
	"lectern/pgtext"
	"lectern/queries"
)

// timeFormat is UTC RFC 3339 with microseconds, as every timestamp on the wire.
const timeFormat = "2006-01-02T15:04:05.000000Z07:00"

// ts formats a timestamp for the wire.
func ts(t time.Time) string { return t.UTC().Format(timeFormat) }

// tsPtr formats an optional timestamp.
func tsPtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := ts(*t)
	return &s
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"detail":"Internal Server Error"}`)
	}
	writeBody(w, status, body)
}

// writeBody writes an encoded JSON body with status. The length goes in the
// header: without it a body past net/http's 2 KiB buffer is sent chunked,
// in more writes.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

type detail struct {
	Detail string `json:"detail"`
}

// writeDetail writes the contract's {"detail": "..."} error body.
func writeDetail(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, detail{Detail: msg})
}

// writeValidation writes a 422 with pydantic-shaped items.
func writeValidation(w http.ResponseWriter, errs validation.Errors) {
	body, err := errs.DetailJSON()
	if err != nil {
		writeDetail(w, http.StatusInternalServerError, "Internal Server Error")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnprocessableEntity)
	_, _ = w.Write(body)
}

// writeError renders err: one table from error kind to status. 5xx are
// logged as errors (with the cause, which the client never sees), the rest
// as info.
func writeError(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	var (
		verrs    validation.Errors
		field    *derrors.FieldError
		located  *derrors.LocatedError
		limited  *derrors.RateLimitedError
		tooLarge *http.MaxBytesError
		de       *derrors.Error
	)
	var (
		tooLargeDoc *knowledge.TooLargeError
		readErr     *bodyError
		netErr      net.Error
	)
	status, msg := http.StatusInternalServerError, "Internal Server Error"
	switch {
	case clientGone(r, err):
		// Nobody reads this answer; the status is for the log and metrics.
		logger.Info("client closed the request", "status", StatusClientClosedRequest, "error", err,
			"method", r.Method, "path", r.URL.Path, "request_id", requestID(r.Context()))
		writeDetail(w, StatusClientClosedRequest, "Client Closed Request")
		return
	case errors.As(err, &readErr) && errors.As(err, &netErr) && netErr.Timeout():
		w.Header().Set("Connection", "close")
		status, msg = http.StatusRequestTimeout, "The request body did not arrive in time"
	case errors.As(err, &readErr):
		w.Header().Set("Connection", "close")
		status, msg = http.StatusBadRequest, "The request body could not be read: it ended before its announced length"
	case errors.As(err, &verrs):
		writeValidation(w, verrs)
		logger.Info("request rejected", "status", 422, "request_id", requestID(r.Context()))
		return
	case errors.As(err, &field):
		// Every field error at once, when the domain joined several.
		items, ok := validation.FieldItems(err, fieldMessage)
		if !ok {
			items = validation.Errors{validation.FieldItem(validation.SourcesOf(err), field, fieldMessage(field))}
		}
		writeValidation(w, items)
		logger.Info("request rejected", "status", 422, "error", err, "request_id", requestID(r.Context()))
		return
	case errors.As(err, &located):
		writeValidation(w, validation.Errors{validation.ValueError(located.Loc, located.Input, located.Msg)})
		logger.Info("request rejected", "status", 422, "error", err, "request_id", requestID(r.Context()))
		return
	case errors.As(err, &limited):
		secs := int(math.Ceil(limited.RetryAfter.Seconds()))
		w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
		status, msg = http.StatusTooManyRequests, limited.Detail
	case errors.As(err, &tooLargeDoc):
		status, msg = http.StatusRequestEntityTooLarge, tooLargeDoc.Detail
	case errors.As(err, &tooLarge):
		status, msg = http.StatusRequestEntityTooLarge, "Request body too large"
	case errors.Is(err, derrors.ErrUnauthenticated):
		w.Header().Set("WWW-Authenticate", "Bearer")
		status, msg = http.StatusUnauthorized, "Could not validate credentials"
	case errors.Is(err, derrors.ErrForbidden):
		status, msg = http.StatusForbidden, "Not enough permissions"
	case errors.Is(err, derrors.ErrNotFound):
		status, msg = http.StatusNotFound, "Not Found"
	case errors.Is(err, derrors.ErrConflict):
		status, msg = http.StatusConflict, "Conflict"
	case errors.Is(err, derrors.ErrBadRequest):
		status, msg = http.StatusBadRequest, "Bad Request"
	case errors.Is(err, derrors.ErrBadGateway):
		status, msg = http.StatusBadGateway, "Bad Gateway"
	case errors.Is(err, derrors.ErrUnavailable) && errors.As(err, &de):
		w.Header().Set("Retry-After", "1")
		status, msg = http.StatusServiceUnavailable, de.Detail
	case errors.Is(err, eventstore.ErrAppendTooLarge):
		status, msg = http.StatusRequestEntityTooLarge, fmt.Sprintf(
			"The change is too large to record: one write holds at most %d bytes", eventstore.MaxAppendBytes)
	case lockNotAvailable(err):
		// A lock the change needed was held past its wait: a session lease
		// that could not be ended (lectern_auth_barrier). Nothing was
		// committed; the same request can be sent again.
		w.Header().Set("Retry-After", "1")
		status, msg = http.StatusServiceUnavailable, "The change could not take a lock it needs in time; retry in a moment"
	case errors.Is(err, eventstore.ErrUnavailable):
		// Nothing was acknowledged; the same request (with its
		// Idempotency-Key, if any) can be sent again.
		w.Header().Set("Retry-After", "1")
		status, msg = http.StatusServiceUnavailable, "The event store is unavailable; retry in a moment"
	case errors.Is(err, context.DeadlineExceeded) && errors.Is(r.Context().Err(), context.DeadlineExceeded):
		// The write's own bound (writeBound) passed: what it waited on
		// did not answer in time.
		w.Header().Set("Retry-After", "1")
		status, msg = http.StatusServiceUnavailable, "The request did not finish in time; retry in a moment (a write with the same Idempotency-Key)"
	case databaseUnavailable(err):
		// A write may or may not have been recorded when its connection
		// was lost: sent again with its Idempotency-Key, it is not
		// recorded twice.
		w.Header().Set("Retry-After", "1")
		status, msg = http.StatusServiceUnavailable, "The database is unavailable; retry in a moment (a write with the same Idempotency-Key)"
	}
	if status < 500 && errors.As(err, &de) {
		msg = de.Detail
	}
	if status >= 500 {
		logger.Error("request failed", "status", status, "error", pgtext.Valueless(err), "method", r.Method, "path", r.URL.Path, "request_id", requestID(r.Context()))
	} else {
		logger.Info("request rejected", "status", status, "error", err, "request_id", requestID(r.Context()))
	}
	writeDetail(w, status, msg)
}

// databaseUnavailable reports whether err is PostgreSQL out of reach or
// out of capacity rather than a defect: no connection could be made, one
// was lost or timed out, the server is shutting down, starting or full, or
// a statement was cancelled (statement_timeout). Only the driver's errors
// count: a mail server or a model provider out of reach is not the
// database.
func databaseUnavailable(err error) bool {
	var connectErr *pgconn.ConnectError
	var pgErr *pgconn.PgError
	// pgconn's own errors say whether a retry is safe, and no other error of
	// the service does; of those, a connection lost mid-statement wraps the
	// network's error or an early end of the stream (a message too large
	// to send, a connection busy, are not the database's).
	var driverErr interface{ SafeToRetry() bool }
	var netErr net.Error
	lost := errors.As(err, &driverErr) && (errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF))
	switch {
	case lost, errors.As(err, &connectErr), pgconn.Timeout(err), errors.Is(err, pgconn.ErrConnClosed):
		return true
	case errors.As(err, &pgErr):
		switch pgErr.Code[:2] {
		case "08", // connection exception
			"53": // insufficient resources: too many connections, disk full, out of memory
			return true
		}
		switch pgErr.Code {
		case "57P01", "57P02", "57P03", // admin or crash shutdown, cannot connect now
			"57014": // query_canceled: a statement_timeout
			return true
		}
	}
	return false
}

// lockNotAvailable reports whether err is PostgreSQL's lock_not_available
// (55P03): a lock timeout, or a session-check barrier that gave up.
func lockNotAvailable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

// fieldErrors turns a command's field errors (errors.Join, nested or not)
// into one validation error list, in order, each at its request location
// (validation.WithSources; the body by default); any other error is
// returned as it is.
func fieldErrors(err error) error {
	if items, ok := validation.FieldItems(err, fieldMessage); ok {
		return items
	}
	return err
}

// fieldMessage words a domain field error for the client: the domain's
// sentence, and what only the interface knows (where a list is served).
func fieldMessage(f *derrors.FieldError) string {
	if errors.Is(f, aggregates.ErrUnknownModel) {
		return f.Msg + "; GET /models lists the models"
	}
	return f.Msg
}

// writeList renders one page of a read model as {items, total, page, size},
// each item encoded as it goes out (streamedObject): a page of long texts
// (200 items of up to 200 000 characters) is never held whole as JSON
// beside its rows. A review's page of 200 few-shot examples of '<'
// answered 156 MB and grew the heap by 462 MB when it was marshalled
// whole. '<', '>' and '&' are written as they are (the answers are
// application/json, with nosniff): escaped, each is six bytes.
func writeList[R, J any](w http.ResponseWriter, list queries.List[R], conv func(R) J) {
	out := &spillWriter{w: w, limit: listBuffered}
	o := &streamedObject{w: out}
	o.array("items", func(add func(any)) error {
		for _, x := range list.Items {
			add(conv(x))
		}
		return nil
	})
	o.member("total", list.Total)
	o.member("page", list.Page.Page)
	o.member("size", list.Page.Size)
	if o.end() != nil {
		out.fail()
		return
	}
	out.finish()
}

// listBuffered is how much of a list's answer is held to send it with its
// length (see writeBody); a longer one goes out chunked as it is encoded.
const listBuffered = 64 << 10

// spillWriter holds an answer of status 200 until it passes limit bytes,
// and from then on writes it through.
type spillWriter struct {
	w       http.ResponseWriter
	buf     []byte
	limit   int
	started bool
}

// Write never fails: a client gone away is not reported (as writeBody
// does not), the rest is written to nothing.
func (s *spillWriter) Write(p []byte) (int, error) {
	if s.started {
		_, _ = s.w.Write(p)
		return len(p), nil
	}
	s.buf = append(s.buf, p...)
	if len(s.buf) > s.limit {
		s.w.Header().Set("Content-Type", "application/json")
		s.w.WriteHeader(http.StatusOK)
		_, _ = s.w.Write(s.buf)
		s.buf, s.started = nil, true
	}
	return len(p), nil
}

// finish sends what is held, with its length.
func (s *spillWriter) finish() {
	if !s.started {
		writeBody(s.w, http.StatusOK, s.buf)
	}
}

// fail ends an answer that could not be encoded: a 500 if none of it went
// out, else the connection is cut, so that the client cannot take the part
// for the whole.
func (s *spillWriter) fail() {
	if !s.started {
		writeBody(s.w, http.StatusInternalServerError, []byte(`{"detail":"Internal Server Error"}`))
		return
	}
	panic(http.ErrAbortHandler)
}
