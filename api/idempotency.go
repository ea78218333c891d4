package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"lectern/api/validation"
	"lectern/commands"
	"lectern/derrors"
)

var idempotencyKeyField = validation.Field{Name: "idempotency-key", Kind: validation.String, MaxLength: 255}

// bufferedResponse holds a response until it is known whether to keep it.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
	// conn is the writer the answer goes out on, if any: its connection's
	// deadlines are the handler's to move (a turn may answer after the
	// server's WriteTimeout), though what it writes is kept here.
	conn http.ResponseWriter
}

// SetWriteDeadline and SetReadDeadline move conn's (http.ResponseController
// finds them here); there is no Unwrap, which would let a Flush send the
// answer's header before it is kept.
func (b *bufferedResponse) SetWriteDeadline(t time.Time) error {
	if b.conn == nil {
		return http.ErrNotSupported
	}
	return http.NewResponseController(b.conn).SetWriteDeadline(t)
}

func (b *bufferedResponse) SetReadDeadline(t time.Time) error {
	if b.conn == nil {
		return http.ErrNotSupported
	}
	return http.NewResponseController(b.conn).SetReadDeadline(t)
}

func (b *bufferedResponse) Header() http.Header { return b.header }
func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}
func (b *bufferedResponse) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}

// idempotencyLeaseDuration is how long a request in progress holds its key
// without renewing it: a retry after a crash waits at most this long.
const idempotencyLeaseDuration = 6 * time.Second

var idempotencyLease = fmt.Sprintf("%d milliseconds", idempotencyLeaseDuration.Milliseconds())

// declareKeyAnswers documents, on every operation that honours
// Idempotency-Key, the 409 idempotently answers while the key's first
// request is in progress (the 422 at the header the document adds itself).
func declareKeyAnswers(ops []operation) {
	for i := range ops {
		if ops[i].idempotent && !slices.Contains(ops[i].errors, http.StatusConflict) {
			// A copy: operations share their errors slices.
			ops[i].errors = append(slices.Clip(ops[i].errors), http.StatusConflict)
		}
	}
}

// releaseKey gives up a key whose request failed: kept, its lease lapsed,
// when something may have been written under it (a retry finds it), else
// forgotten.
func (s *Server) releaseKey(ctx context.Context, userID int64, key string, mayHaveWritten bool) {
	ctx = context.WithoutCancel(ctx)
	if mayHaveWritten {
		_, _ = s.deps.DB.Exec(ctx, `UPDATE idempotency_keys SET lease_until = now() - interval '1 millisecond'
			WHERE user_id = $1 AND key = $2 AND status = 0`, userID, key)
		return
	}
	_, _ = s.deps.DB.Exec(ctx, `DELETE FROM idempotency_keys WHERE user_id = $1 AND key = $2`, userID, key)
}

// replayedHeaders are the headers a replay repeats.
var replayedHeaders = []string{"Content-Type", "X-Event-Position", "X-Projection-Pending", "Location"}

// idempotently runs a POST once per (user, Idempotency-Key): a retry with the
// same key and request gets the first response and appends nothing. Keys are
// kept 24 hours.
//
// A request whose process died holds its key only for its lease; a retry
// then runs it again under the same key (commands.WithIdempotency): it
// draws the ids the dead attempt drew and derives the same event ids, so it
// finds what that attempt appended and answers with it instead of appending
// again.
//
// admit, called once the request is known to run (not replayed), may refuse
// it (the write budget); the key is then released as by a failure.
func (s *Server) idempotently(w http.ResponseWriter, r *http.Request, userID int64, body []byte, admit func() error, handle func(context.Context, http.ResponseWriter) error) error {
	key := r.Header.Get("Idempotency-Key")
	if _, errs := validation.Header("Idempotency-Key", key, idempotencyKeyField); len(errs) > 0 {
		return errs
	}
	sum := sha256.Sum256(body)
	request := r.Method + " " + r.URL.RequestURI() + " " + hex.EncodeToString(sum[:])
	ctx := r.Context()
	db := s.deps.DB

	// Keys older than a day are forgotten.
	if _, err := db.Exec(ctx, `DELETE FROM idempotency_keys WHERE user_id = $1 AND key = $2 AND created_at < now() - interval '24 hours'`, userID, key); err != nil {
		return err
	}
	// since, when the key was taken, tells this use of the key from one
	// after it was forgotten.
	var since time.Time
	err := db.QueryRow(ctx, `INSERT INTO idempotency_keys (user_id, key, request, status, headers, body, lease_until)
		VALUES ($1, $2, $3, 0, '{}', '', now() + $4::interval) ON CONFLICT DO NOTHING RETURNING created_at`,
		userID, key, request, idempotencyLease).Scan(&since)
	owned := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	tookOver := false
	if !owned {
		// A request of the same key and body whose lease lapsed died with
		// its process: this retry takes the key over and runs it.
		err := db.QueryRow(ctx, `UPDATE idempotency_keys SET lease_until = now() + $4::interval
			WHERE user_id = $1 AND key = $2 AND request = $3 AND status = 0 AND lease_until < now()
			RETURNING created_at`, userID, key, request, idempotencyLease).Scan(&since)
		owned, tookOver = err == nil, err == nil
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
	}
	if !owned {
		var storedRequest string
		var status int
		var headers map[string]string
		var stored []byte
		err := db.QueryRow(ctx, `SELECT request, status, headers, body FROM idempotency_keys WHERE user_id = $1 AND key = $2`, userID, key).
			Scan(&storedRequest, &status, &headers, &stored)
		if errors.Is(err, pgx.ErrNoRows) {
			return derrors.New(derrors.ErrConflict, "A request with this Idempotency-Key is still in progress")
		}
		if err != nil {
			return err
		}
		if storedRequest != request {
			return derrors.Invalid([]any{"header", "Idempotency-Key"}, key, "Idempotency-Key was already used with a different request")
		}
		if status == 0 {
			return derrors.New(derrors.ErrConflict, "A request with this Idempotency-Key is still in progress")
		}
		for k, v := range headers {
			w.Header().Set(k, v)
		}
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(status)
		_, _ = w.Write(stored)
		return nil
	}

	if err := admit(); err != nil {
		s.releaseKey(ctx, userID, key, tookOver)
		return err
	}

	// Renew the lease while the request runs (a practice turn may take
	// longer than the lease).
	renewCtx, stopRenewing := context.WithCancel(context.WithoutCancel(ctx))
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		t := time.NewTicker(idempotencyLeaseDuration / 3)
		defer t.Stop()
		for {
			select {
			case <-renewCtx.Done():
				return
			case <-t.C:
				_, _ = db.Exec(renewCtx, `UPDATE idempotency_keys SET lease_until = now() + $3::interval
					WHERE user_id = $1 AND key = $2 AND status = 0`, userID, key, idempotencyLease)
			}
		}
	}()
	buf := &bufferedResponse{header: http.Header{}, conn: w}
	hctx := commands.WithIdempotency(ctx, userID, key, since)
	herr := handle(hctx, buf)
	stopRenewing()
	<-renewed
	if herr != nil || buf.status >= 400 {
		// Failures are not remembered: a retry runs again. A failure after
		// an append (or one that may have been written) keeps the key, its
		// lease lapsed, so that a retry of the same request finds what was
		// written; so does the failure of a retry that took the key over,
		// as the attempt before it may have appended (a turn's models fail
		// before the turn looks for what that attempt recorded). One that
		// wrote nothing, and followed none that might have, forgets the key.
		s.releaseKey(ctx, userID, key, commands.MayHaveAppended(hctx) || tookOver)
		if herr != nil {
			return herr
		}
	} else {
		keep := map[string]string{}
		for _, h := range replayedHeaders {
			if v := buf.header.Get(h); v != "" {
				keep[h] = v
			}
		}
		hdr, _ := json.Marshal(keep)
		if _, err := db.Exec(context.WithoutCancel(ctx), `UPDATE idempotency_keys SET status = $3, headers = $4, body = $5 WHERE user_id = $1 AND key = $2`,
			userID, key, buf.status, hdr, buf.body.Bytes()); err != nil {
			return err
		}
	}
	for k, v := range buf.header {
		w.Header()[k] = v
	}
	w.WriteHeader(buf.status)
	_, _ = w.Write(buf.body.Bytes())
	return nil
}
