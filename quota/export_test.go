package quota

import (
	"time"

	"lectern/ratelimit"
)

// NewWithAccounts is New remembering at most accounts users.
func NewWithAccounts(l *ratelimit.Limiter, r ratelimit.Rate, now func() time.Time, accounts int) *Budget {
	return newBudget(l, r, now, accounts)
}
