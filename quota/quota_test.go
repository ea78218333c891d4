package quota_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"lectern/clocktest"
	"lectern/pgtest"
	"lectern/poll"
	"lectern/quota"
	"lectern/ratelimit"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A budget of 64 KiB a day: leases of 4 KiB, a day's sixteenth (5 400 s).
var (
	day   = 24 * time.Hour
	small = ratelimit.Rate{N: 64 << 10, Per: day}
)

const lease = 4 << 10

var users struct {
	sync.Mutex
	next int64
}

// user is a user id no other test uses (the buckets share one database).
func user() int64 {
	users.Lock()
	defer users.Unlock()
	users.next++
	return 1_000_000 + users.next
}

func admit(t *testing.T, b *quota.Budget, userID int64) (time.Duration, bool) {
	t.Helper()
	wait, ok, err := b.Admit(context.Background(), userID)
	if err != nil {
		t.Fatal(err)
	}
	return wait, ok
}

func spend(t *testing.T, b *quota.Budget, userID, n int64) {
	t.Helper()
	if err := b.Spend(context.Background(), userID, n); err != nil {
		t.Fatal(err)
	}
}

// Two replicas draw from one budget: together they let through no more
// than the budget and one write each past it, and no less than the budget
// less the leases they hold when it runs out.
func TestABudgetHoldsAcrossReplicas(t *testing.T) {
	t.Parallel()
	pool, clk := pgtest.Pool(t), clocktest.New(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	replicas := []*quota.Budget{
		quota.New(ratelimit.New(pool, clk.Now), small, clk.Now),
		quota.New(ratelimit.New(pool, clk.Now), small, clk.Now),
	}
	u, write := user(), int64(1000)
	var admitted int64
	refused := 0
	for i := 0; refused < 2 && i < 1000; i++ {
		r := replicas[i%2]
		if _, ok := admit(t, r, u); !ok {
			refused++
			continue
		}
		refused = 0
		spend(t, r, u, write)
		admitted += write
	}
	if refused < 2 {
		t.Fatalf("%d bytes let through a budget of %d, and still going", admitted, small.N)
	}
	if hi, lo := int64(small.N)+2*write, int64(small.N)-2*lease; admitted > hi || admitted < lo {
		t.Errorf("%d bytes let through a budget of %d, want %d..%d", admitted, small.N, lo, hi)
	}
	for i, r := range replicas {
		wait, ok := admit(t, r, u)
		if ok || wait <= 0 || wait > day {
			t.Errorf("replica %d: admitted %v, wait %s; want a refusal of at most a day", i, ok, wait)
		}
	}
}

// A write is counted whole though it is larger than the budget (its size
// is known only once it is read): the user waits out the debt, then gets a
// lease again.
func TestAWriteBeyondTheBudgetIsADebt(t *testing.T) {
	t.Parallel()
	pool, clk := pgtest.Pool(t), clocktest.New(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	b := quota.New(ratelimit.New(pool, clk.Now), small, clk.Now)
	u := user()
	if _, ok := admit(t, b, u); !ok {
		t.Fatal("a new user's first write refused")
	}
	spend(t, b, u, 3*int64(small.N))
	// Three days' budget used; the next lease fits after two days and the
	// lease's own sixteenth of a day.
	want := 2*day + day/16
	if wait, ok := admit(t, b, u); ok || wait != want {
		t.Fatalf("after a debt of two days: admitted %v, wait %s; want a wait of %s", ok, wait, want)
	}
	clk.Advance(want - time.Microsecond)
	if wait, ok := admit(t, b, u); ok || wait != time.Microsecond {
		t.Fatalf("a microsecond early: admitted %v, wait %s", ok, wait)
	}
	clk.Advance(time.Microsecond)
	if _, ok := admit(t, b, u); !ok {
		t.Fatal("refused once the debt is paid")
	}
	spend(t, b, u, 1000)
	if _, ok := admit(t, b, u); !ok {
		t.Fatal("refused after a write within the new lease")
	}
	// Another user's budget is their own.
	if _, ok := admit(t, b, user()); !ok {
		t.Fatal("another user refused")
	}
}

// A replica that forgets a user (too many users seen since) asks the
// database again before their next write.
func TestAForgottenAccountIsRefusedByTheDatabase(t *testing.T) {
	t.Parallel()
	pool, clk := pgtest.Pool(t), clocktest.New(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	b := quota.NewWithAccounts(ratelimit.New(pool, clk.Now), small, clk.Now, 2)
	u := user()
	if _, ok := admit(t, b, u); !ok {
		t.Fatal("a new user refused")
	}
	spend(t, b, u, int64(small.N))
	if _, ok := admit(t, b, u); ok {
		t.Fatal("admitted past the budget")
	}
	// Two other users seen since: u is forgotten, and the budget is asked
	// again, which is spent.
	for range 2 {
		if _, ok := admit(t, b, user()); !ok {
			t.Fatal("another user refused")
		}
	}
	var rows int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM rate_buckets WHERE bucket = $1`, quota.Bucket(u)).Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("the budget's row: %d rows, %v", rows, err)
	}
	if _, ok := admit(t, b, u); ok {
		t.Error("a forgotten account admitted again: its budget is spent")
	}
}

// Writes of one user at once are each counted once: the database holds
// what they sent, and at most one lease more.
func TestConcurrentWritesAreEachCounted(t *testing.T) {
	t.Parallel()
	pool, clk := pgtest.Pool(t), clocktest.New(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	big := ratelimit.Rate{N: 64 << 20, Per: day} // 1 287 ns a byte
	b := quota.New(ratelimit.New(pool, clk.Now), big, clk.Now)
	u := user()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if err := b.Spend(context.Background(), u, 999); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	var tat time.Time
	if err := pool.QueryRow(context.Background(), `SELECT tat FROM rate_buckets WHERE bucket = $1`, quota.Bucket(u)).Scan(&tat); err != nil {
		t.Fatal(err)
	}
	spent := int64(8 * 100 * 999)
	perByte := float64(day) / float64(big.N)
	counted := float64(tat.Sub(clk.Now())) / perByte
	if counted < float64(spent) || counted > float64(spent+64<<10)+1 {
		t.Errorf("the database counts %.0f bytes of %d written, want at most a lease (64 KiB) more", counted, spent)
	}
}

// A write that finds another write of the user buying the lease waits for
// its outcome rather than going through: here the budget is spent (by
// another replica) and the statement held by a lock on the bucket's row,
// so a second write is still waiting when its deadline passes, and both
// are refused once the statement has answered.
func TestAWriteWaitsForTheLeaseBeingBought(t *testing.T) {
	t.Parallel()
	pool, clk := pgtest.Pool(t), clocktest.New(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	ctx := context.Background()
	u := user()
	other := quota.New(ratelimit.New(pool, clk.Now), small, clk.Now)
	admit(t, other, u)
	spend(t, other, u, int64(small.N))

	b := quota.New(ratelimit.New(pool, clk.Now), small, clk.Now) // has not seen u
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM rate_buckets WHERE bucket = $1 FOR UPDATE`, quota.Bucket(u)); err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		ok  bool
		err error
	}
	first := make(chan outcome, 1)
	go func() {
		_, ok, err := b.Admit(ctx, u)
		first <- outcome{ok, err}
	}()
	// The first write's statement waits on the row.
	poll.Must(t, 10*time.Second, "the first write's statement waiting on the bucket's row", func() bool {
		var waiting bool
		err := pool.QueryRow(ctx, `SELECT count(*) > 0 FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO rate_buckets%'`).Scan(&waiting)
		return err == nil && waiting
	})
	soon, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, ok, err := b.Admit(soon, u); ok || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second write while the first buys the lease: admitted %v, error %v; want it waiting", ok, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := <-first; got.ok || got.err != nil {
		t.Fatalf("the first write on a spent budget: admitted %v, error %v", got.ok, got.err)
	}
	if _, ok := admit(t, b, u); ok {
		t.Error("a third write admitted on a spent budget")
	}
}

// A debt whose counting failed (a statement cut short) is counted by the
// user's next write, even once the replica has forgotten the user.
func TestADebtOutlivesItsAccount(t *testing.T) {
	t.Parallel()
	pool, clk := pgtest.Pool(t), clocktest.New(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	b := quota.NewWithAccounts(ratelimit.New(pool, clk.Now), small, clk.Now, 1)
	u := user()
	admit(t, b, u)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Spend(gone, u, 3*int64(small.N)); err == nil {
		t.Fatal("Spend on a cancelled context counted its debt: the test proves nothing")
	}
	admit(t, b, user()) // another user: u is forgotten
	if wait, ok := admit(t, b, u); ok || wait < 2*day {
		t.Errorf("after three days' budget not counted and the account forgotten: admitted %v, wait %s; want two days and more", ok, wait)
	}
}
