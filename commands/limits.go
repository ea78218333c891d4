package commands

import (
	"context"
	"time"

	"lectern/derrors"
	"lectern/ratelimit"
)

// Limits are the rate limits of sign-up, login and joining a class. A zero
// field takes its default (DefaultLimits).
type Limits struct {
	// Address: login, send-code and verify-code attempts per client address,
	// each (a token bucket).
	Address ratelimit.Rate
	// Failures: wrong passwords (or codes) for one account from one client
	// address, in any interval (a sliding window). A third party's failures
	// from another address never count against the owner's.
	Failures ratelimit.Window
	// AccountFailures: wrong passwords (or codes) for one account from all
	// addresses together, which bounds distributed guessing. When it is
	// reached, only addresses the account logged in from within KnownAddress
	// still get their own Failures (so a botnet cannot lock the owner out
	// of the places they use).
	AccountFailures ratelimit.Window
	// KnownAddress is how long a successful login makes its address known.
	KnownAddress time.Duration
	// SendCode: verification codes sent to one e-mail address.
	SendCode ratelimit.Window
	// JoinAddress and JoinUser: invite-code joins per client address and per
	// user (token buckets).
	JoinAddress ratelimit.Rate
	JoinUser    ratelimit.Rate
	// JoinFailures: joins of one user that failed (unknown, expired, used up
	// or revoked code...); at the limit the user's joins get 429 until the
	// oldest failure leaves the window.
	JoinFailures ratelimit.Window
	// Turns: practice turns per user (a token bucket), run or continued,
	// streamed or not. Each turn calls up to ten models on the providers'
	// bill: without a bound, one script could spend the school's budget.
	Turns ratelimit.Rate
	// Uploads: knowledge documents uploaded per user (a token bucket). Each
	// may cost seconds of a core to extract (a PDF, up to its timeout) and
	// its chunks' embedding, on the embedder's bill.
	Uploads ratelimit.Rate
	// PromotionRequests: partner-role requests filed per user (a token
	// bucket). Each waits in the admins' list for a decision: without a
	// bound, one user could bury everyone else's there.
	PromotionRequests ratelimit.Rate
}

// DefaultLimits are the limits a zero Limits stands for.
var DefaultLimits = Limits{
	Address:         ratelimit.Rate{N: DefaultAddressLimit, Per: AddressWindow},
	Failures:        ratelimit.Window{N: FailureLimit, Size: FailureWindow},
	AccountFailures: ratelimit.Window{N: 50, Size: time.Hour},
	KnownAddress:    90 * 24 * time.Hour,
	SendCode:        ratelimit.Window{N: FailureLimit, Size: FailureWindow},
	JoinAddress:     ratelimit.Rate{N: 60, Per: time.Minute},
	JoinUser:        ratelimit.Rate{N: 10, Per: time.Minute},
	JoinFailures:    ratelimit.Window{N: 10, Size: time.Hour},
	Turns:           ratelimit.Rate{N: DefaultTurnLimit, Per: time.Minute},
	Uploads:         ratelimit.Rate{N: DefaultUploadLimit, Per: time.Minute},
	// Five at once (a request for each of a few organisations, a typo put
	// right), then one every few hours.
	PromotionRequests: ratelimit.Rate{N: 5, Per: 24 * time.Hour},
}

// DefaultUploadLimit is the default of Limits.Uploads a minute: a course's
// documents at once, then one every six seconds.
const DefaultUploadLimit = 10

// DefaultTurnLimit is the default of Limits.Turns a minute: a burst of as
// many, then one every three seconds, more than a person types.
const DefaultTurnLimit = 20

// withDefaults fills zero fields from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	rate := func(r *ratelimit.Rate, def ratelimit.Rate) {
		if r.N <= 0 || r.Per <= 0 {
			*r = def
		}
	}
	window := func(w *ratelimit.Window, def ratelimit.Window) {
		if w.N <= 0 || w.Size <= 0 {
			*w = def
		}
	}
	rate(&l.Address, d.Address)
	window(&l.Failures, d.Failures)
	window(&l.AccountFailures, d.AccountFailures)
	if l.KnownAddress <= 0 {
		l.KnownAddress = d.KnownAddress
	}
	window(&l.SendCode, d.SendCode)
	rate(&l.JoinAddress, d.JoinAddress)
	rate(&l.JoinUser, d.JoinUser)
	window(&l.JoinFailures, d.JoinFailures)
	rate(&l.Turns, d.Turns)
	rate(&l.Uploads, d.Uploads)
	rate(&l.PromotionRequests, d.PromotionRequests)
	return l
}

// Refusals as a client sees them (429, with Retry-After).
const (
	tooManyRequests = "Too many requests; try again later"
	tooManyFailures = "Too many failed attempts; try again later"
)

// allow takes a token from bucket at rate r: a 429 with Retry-After and
// detail when the bucket is empty.
func allow(ctx context.Context, l *ratelimit.Limiter, bucket string, r ratelimit.Rate, detail string) error {
	d, err := l.Allow(ctx, bucket, r)
	if err != nil {
		return err
	}
	if !d.OK {
		return &derrors.RateLimitedError{RetryAfter: d.RetryAfter, Detail: detail}
	}
	return nil
}
