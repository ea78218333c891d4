// Package quota bounds what each user may store: a budget of bytes their
// writes record, a day. Every event lasts for good, so without it one
// script could fill the event store at the speed of its writes.
//
// The budget is a token bucket in PostgreSQL (ratelimit), so that every
// replica draws from the same one. A replica buys it in leases, a slice of
// the budget at a time, and counts writes against its lease in memory: a
// write asks the database only when its replica's lease runs out, not each
// time, and one that finds another asking waits for the answer. What a
// write records beyond its lease is counted all the same (a debt the user
// then waits out), so the budget holds over time whatever the replicas'
// leases; in the moment, a replica that has not yet heard that a user's
// budget is spent lets through the writes already under way.
package quota

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"lectern/ratelimit"
)

// DefaultRate is the budget's default: 64 MiB a day, usable at once, then
// refilled evenly. A course's documents (each upload at most 1 MiB) fit in
// it with room to spare; what a person types in a day is a small part.
var DefaultRate = ratelimit.Rate{N: 64 << 20, Per: 24 * time.Hour}

// Lease bounds: a lease is a sixteenth of the budget, at most maxLease.
const (
	maxLease = 64 << 10
	// maxAccounts bounds the users whose lease a replica remembers; the
	// least recently seen is forgotten first, with what is left of its
	// lease (the database keeps the budget).
	maxAccounts = 100_000
)

// Bucket is the rate_buckets row of a user's budget (erasure deletes it;
// the export shows it).
func Bucket(userID int64) string { return "writes:" + strconv.FormatInt(userID, 10) }

// Budget is every user's budget, as one replica sees it.
type Budget struct {
	limiter *ratelimit.Limiter
	rate    ratelimit.Rate
	lease   int64
	now     func() time.Time

	mu       sync.Mutex
	accounts *simplelru.LRU[int64, *account]
	// debts are what forgotten accounts still owe (their counting failed):
	// the user's next account starts with it.
	debts map[int64]int64
}

// account is what a replica knows of one user's budget.
type account struct {
	// balance is what is left of the lease, less what writes used since
	// (negative: a debt to count).
	balance int64
	// counted, while a statement counts the debt and buys a lease, is
	// closed when it has: writes wait for its outcome.
	counted chan struct{}
	// blockedUntil is when the next lease fits the budget: no write before.
	blockedUntil time.Time
}

// New returns budgets of rate r (bytes per period; a zero rate is
// DefaultRate) kept by limiter, on the clock now (nil: time.Now).
func New(limiter *ratelimit.Limiter, r ratelimit.Rate, now func() time.Time) *Budget {
	return newBudget(limiter, r, now, maxAccounts)
}

func newBudget(limiter *ratelimit.Limiter, r ratelimit.Rate, now func() time.Time, accounts int) *Budget {
	if r.N <= 0 || r.Per <= 0 {
		r = DefaultRate
	}
	if now == nil {
		now = time.Now
	}
	b := &Budget{limiter: limiter, rate: r, lease: max(1, min(maxLease, int64(r.N)/16)), now: now, debts: map[int64]int64{}}
	lru, err := simplelru.NewLRU(accounts, b.forgotten)
	if err != nil {
		panic(err) // only for a size below 1
	}
	b.accounts = lru
	return b
}

// forgotten keeps the debt of an account the replica forgets. b.mu is held.
func (b *Budget) forgotten(userID int64, a *account) {
	if a.balance < 0 {
		b.debts[userID] += -a.balance
	}
}

// Admit reports whether userID may write now; when not, how long until
// they may. A replica holding none of the user's budget buys a lease first
// (a statement), and counts the debt of earlier writes with it; a write
// that finds such a statement under way waits for its outcome.
func (b *Budget) Admit(ctx context.Context, userID int64) (time.Duration, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		a := b.account(userID)
		if wait := a.blockedUntil.Sub(b.now()); wait > 0 {
			return wait, false, nil
		}
		if a.balance > 0 {
			return 0, true, nil
		}
		if a.counted == nil {
			if err := b.settle(ctx, userID, a); err != nil {
				return 0, false, err
			}
			continue
		}
		counted := a.counted
		b.mu.Unlock()
		select {
		case <-counted:
			b.mu.Lock()
		case <-ctx.Done():
			b.mu.Lock()
			return 0, false, ctx.Err()
		}
	}
}

// Spend counts n bytes that an accepted write of userID recorded. Within
// the replica's lease it is a subtraction; past it, the overrun is counted
// in the database with the next lease bought, or the user blocked until one
// fits. On an error the debt stays, for the next write to count.
func (b *Budget) Spend(ctx context.Context, userID, n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	a := b.account(userID)
	a.balance -= n
	if a.balance >= 0 || a.counted != nil {
		return nil // a statement under way counts it
	}
	return b.settle(ctx, userID, a)
}

// account is userID's account, made with what a forgotten one owed when
// the replica has none. b.mu is held.
func (b *Budget) account(userID int64) *account {
	a, ok := b.accounts.Get(userID)
	if !ok {
		a = &account{balance: -b.debts[userID]}
		delete(b.debts, userID)
		b.accounts.Add(userID, a)
	}
	return a
}

// settle counts a's debt in the database and buys a lease, or learns until
// when the user must wait, with b.mu held (released during the statement).
// Writes that spend meanwhile leave their debt to it: it goes round again
// until none is left.
func (b *Budget) settle(ctx context.Context, userID int64, a *account) error {
	a.counted = make(chan struct{})
	defer func() {
		close(a.counted)
		a.counted = nil
	}()
	for {
		owed := max(0, -a.balance)
		a.balance = 0
		b.mu.Unlock()
		d, err := b.limiter.Charge(ctx, Bucket(userID), b.rate, owed, b.lease)
		b.mu.Lock()
		if cur, ok := b.accounts.Peek(userID); !ok || cur != a {
			// Forgotten meanwhile (what it owed then is in debts): the
			// user's next account starts afresh, with this debt too if
			// it was not counted.
			if err != nil {
				b.debts[userID] += owed
			}
			return err
		}
		if err != nil {
			a.balance -= owed
			return err
		}
		if d.OK {
			a.balance += b.lease
		} else {
			a.blockedUntil = b.now().Add(d.RetryAfter)
		}
		if a.balance >= 0 {
			return nil
		}
	}
}
