package api

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"slices"

	"lectern/derrors"
)

// The write budget (quota): what each user's writes may send, in bytes a
// day. A write is admitted while the budget lasts; once it has run, what
// its body held is counted against it.

// writeBudgetSpent is the detail of a write refused for the budget.
const writeBudgetSpent = "Too much written for now: your daily write budget is spent; try again later"

// metered reports whether a request of op draws on its caller's budget:
// every authenticated write but those that store nothing the caller typed,
// or must work once it is spent.
func (s *Server) metered(op operation) bool { return s.deps.Writes != nil && drawsOnBudget(op) }

func drawsOnBudget(op operation) bool {
	return op.auth && op.method != http.MethodGet && !op.unmetered
}

// admitWrite refuses a write of userID whose budget is spent (429, with
// when it will not be).
func (s *Server) admitWrite(ctx context.Context, userID int64) error {
	wait, ok, err := s.deps.Writes.Admit(ctx, userID)
	if err != nil {
		return err
	}
	if !ok {
		return &derrors.RateLimitedError{RetryAfter: wait, Detail: writeBudgetSpent}
	}
	return nil
}

// spendWrite counts n bytes of an accepted write. It cannot fail the write,
// which is recorded: a failure to count is logged, and the debt stays for
// the user's next write to count.
func (s *Server) spendWrite(ctx context.Context, userID, n int64) {
	if err := s.deps.Writes.Spend(ctx, userID, n); err != nil {
		s.deps.Logger.LogAttrs(ctx, slog.LevelWarn, "write budget not counted", slog.Int64("user_id", userID), slog.String("error", err.Error()))
	}
}

// declareBudgetAnswers documents the 429 of every metered operation.
func declareBudgetAnswers(ops []operation) {
	for i := range ops {
		if drawsOnBudget(ops[i]) && !slices.Contains(ops[i].errors, http.StatusTooManyRequests) {
			// A copy: operations share their errors slices.
			ops[i].errors = append(slices.Clip(ops[i].errors), http.StatusTooManyRequests)
		}
	}
}

// countedBody counts the bytes read of a request's body.
type countedBody struct {
	io.ReadCloser
	n int64
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	return n, err
}
