package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"lectern/derrors"
)

// The write budget (quota): what each user's writes may record, in bytes a
// day. A write is admitted while the budget lasts; what it records (its
// events, a document's text: commands.Meter) is then counted against it.

// writeBudgetSpent is the detail of a write refused for the budget.
const writeBudgetSpent = "Too much written for now: your daily write budget is spent; try again later"

// spendWait bounds the statement that counts a write past its replica's
// lease: the write is over by then, and an uncounted debt is kept for the
// user's next write.
const spendWait = 10 * time.Second

// metered reports whether a request of op draws on its caller's budget.
func (s *Server) metered(op operation) bool { return s.deps.Writes != nil && drawsOnBudget(op) }

// drawsOnBudget: every authenticated write but those that record nothing
// the caller typed, or must work once the budget is spent (unmetered).
func drawsOnBudget(op operation) bool {
	return op.auth && op.method != http.MethodGet && !op.unmetered
}

// admitWrite refuses a write of userID whose budget is spent (429, with
// when it will not be). Its statement, when it needs one, is bounded as the
// write is: a stalled database is a 503, not a request held.
func (s *Server) admitWrite(ctx context.Context, op operation, userID int64) error {
	ctx, cancel := context.WithTimeout(ctx, s.writeBound(op.id))
	defer cancel()
	wait, ok, err := s.deps.Writes.Admit(ctx, userID)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		return derrors.New(derrors.ErrUnavailable, "The write budget could not be checked in time; retry in a moment")
	}
	if err != nil {
		return err
	}
	if !ok {
		return &derrors.RateLimitedError{RetryAfter: wait, Detail: writeBudgetSpent}
	}
	return nil
}

// spendWrite counts n bytes that a write of userID recorded. It cannot fail
// the write, which is recorded: a failure to count is logged, and the debt
// stays for the user's next write to count.
func (s *Server) spendWrite(ctx context.Context, userID, n int64) {
	if n == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), spendWait)
	defer cancel()
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
