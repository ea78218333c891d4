package ratelimit_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/clocktest"
	"lectern/pgtest"
	"lectern/ratelimit"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newLimiter is a limiter on the package's database and a clock of its own,
// started on a round quarter-hour, where a fixed window would start.
func newLimiter(t *testing.T) (*ratelimit.Limiter, *clocktest.Clock, *pgxpool.Pool) {
	t.Helper()
	return limiterOn(pgtest.Pool(t))
}

func limiterOn(pool *pgxpool.Pool) (*ratelimit.Limiter, *clocktest.Clock, *pgxpool.Pool) {
	clk := clocktest.New(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	return ratelimit.New(pool, clk.Now), clk, pool
}

var bucketSeq struct {
	sync.Mutex
	n int
}

// bucket is a bucket name no other test uses.
func bucket(t *testing.T) string {
	bucketSeq.Lock()
	defer bucketSeq.Unlock()
	bucketSeq.n++
	return fmt.Sprintf("%s-%d", t.Name(), bucketSeq.n)
}

func allow(t *testing.T, l *ratelimit.Limiter, b string, r ratelimit.Rate) ratelimit.Decision {
	t.Helper()
	d, err := l.Allow(context.Background(), b, r)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func take(t *testing.T, l *ratelimit.Limiter, b string, w ratelimit.Window) (ratelimit.Hit, ratelimit.Decision) {
	t.Helper()
	h, d, err := l.Take(context.Background(), b, w)
	if err != nil {
		t.Fatal(err)
	}
	return h, d
}

func wantDecision(t *testing.T, what string, got ratelimit.Decision, ok bool, retry time.Duration) {
	t.Helper()
	if got.OK != ok || got.RetryAfter != retry {
		t.Errorf("%s: %+v, want OK %v RetryAfter %s", what, got, ok, retry)
	}
}

func TestAllowBurstThenRefill(t *testing.T) {
	t.Parallel()
	l, clk, _ := newLimiter(t)
	b, r := bucket(t), ratelimit.Rate{N: 4, Per: time.Minute} // a token every 15 s
	for i := 1; i <= 4; i++ {
		wantDecision(t, fmt.Sprintf("hit %d of the burst", i), allow(t, l, b, r), true, 0)
	}
	wantDecision(t, "hit 5", allow(t, l, b, r), false, 15*time.Second)
	clk.Advance(10 * time.Second)
	// Refused hits do not push the refill away.
	for range 3 {
		wantDecision(t, "10 s later", allow(t, l, b, r), false, 5*time.Second)
	}
	clk.Advance(5*time.Second - time.Microsecond)
	wantDecision(t, "a microsecond early", allow(t, l, b, r), false, time.Microsecond)
	clk.Advance(time.Microsecond)
	wantDecision(t, "at Retry-After", allow(t, l, b, r), true, 0)
	wantDecision(t, "right after", allow(t, l, b, r), false, 15*time.Second)
	// A full refill after a minute idle, never more than N.
	clk.Advance(10 * time.Minute)
	for i := 1; i <= 4; i++ {
		wantDecision(t, fmt.Sprintf("hit %d after idling", i), allow(t, l, b, r), true, 0)
	}
	wantDecision(t, "hit 5 after idling", allow(t, l, b, r), false, 15*time.Second)
}

// An emission interval that is not a whole number of microseconds is
// rounded up: never more than N per Per.
func TestAllowRoundsTheIntervalUp(t *testing.T) {
	t.Parallel()
	l, clk, _ := newLimiter(t)
	b, r := bucket(t), ratelimit.Rate{N: 3, Per: time.Microsecond * 10} // 3.33 µs
	allowed := 0
	for range 100 {
		if allow(t, l, b, r).OK {
			allowed++
		}
		clk.Advance(time.Microsecond)
	}
	// 3 at once, then one every 4 µs over the remaining 99 µs.
	if allowed > 3+100/3 {
		t.Errorf("%d hits allowed in 100 µs at 3 per 10 µs, want at most %d", allowed, 3+100/3)
	}
}

func charge(t *testing.T, l *ratelimit.Limiter, b string, r ratelimit.Rate, owed, want int64) ratelimit.Decision {
	t.Helper()
	d, err := l.Charge(context.Background(), b, r, owed, want)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Charge sells leases while the bucket holds them, always counts what was
// used beyond them (a debt later leases wait out), and a refused lease
// takes nothing.
func TestChargeLeasesThenDebt(t *testing.T) {
	t.Parallel()
	l, clk, _ := newLimiter(t)
	b, r := bucket(t), ratelimit.Rate{N: 1000, Per: 1000 * time.Second} // a unit a second
	wantDecision(t, "the first lease", charge(t, l, b, r, 0, 400), true, 0)
	wantDecision(t, "the second lease", charge(t, l, b, r, 0, 400), true, 0)
	// 800 of 1 000 taken: 400 more fit in 200 s.
	for range 3 {
		wantDecision(t, "a third lease", charge(t, l, b, r, 0, 400), false, 200*time.Second)
	}
	// 300 used beyond the leases are counted though the bucket lacks them.
	wantDecision(t, "a debt", charge(t, l, b, r, 300, 400), false, 500*time.Second)
	clk.Advance(500*time.Second - time.Microsecond)
	wantDecision(t, "a microsecond early", charge(t, l, b, r, 0, 400), false, time.Microsecond)
	clk.Advance(time.Microsecond)
	wantDecision(t, "at Retry-After", charge(t, l, b, r, 0, 400), true, 0)
	// A fresh bucket counts a debt too.
	fresh := bucket(t)
	wantDecision(t, "a fresh bucket's debt", charge(t, l, fresh, r, 1500, 100), false, 600*time.Second)
	wantDecision(t, "nothing wanted", charge(t, l, fresh, r, 0, 0), false, 500*time.Second)
	clk.Advance(time.Hour)
	wantDecision(t, "idle for an hour", charge(t, l, fresh, r, 0, 1000), true, 0)
}

// A unit that is not a whole number of microseconds costs its share,
// rounded up once per charge.
func TestChargeRoundsUpOnce(t *testing.T) {
	t.Parallel()
	l, _, _ := newLimiter(t)
	b, r := bucket(t), ratelimit.Rate{N: 3 << 20, Per: 24 * time.Hour} // 27.5 µs a unit
	wantDecision(t, "the whole bucket", charge(t, l, b, r, 0, 3<<20), true, 0)
	wantDecision(t, "one more unit", charge(t, l, b, r, 0, 1), false, 27466*time.Microsecond)
}

// The largest budgets sell their leases (a unit costs a fraction of a
// microsecond: the product n*Per overflows 64 bits, not the cost), and a
// debt of centuries is counted as a hundred years, which PostgreSQL holds.
func TestChargeAtTheEdges(t *testing.T) {
	t.Parallel()
	l, _, _ := newLimiter(t)
	huge := ratelimit.Rate{N: math.MaxInt64, Per: 24 * time.Hour}
	wantDecision(t, "a lease of the largest budget", charge(t, l, bucket(t), huge, 1<<40, 64<<10), true, 0)
	tiny := ratelimit.Rate{N: 1, Per: 24 * time.Hour}
	century := 100 * 365 * 24 * time.Hour
	wantDecision(t, "a debt of centuries", charge(t, l, bucket(t), tiny, math.MaxInt64, 0), false, century-24*time.Hour)
}

// The window-edge attack: five failures just before the edge of a
// quarter-hour and five just after. A fixed window let all ten through in
// seconds; a sliding window allows at most five in any 15 minutes.
func TestTakeWindowEdge(t *testing.T) {
	t.Parallel()
	l, clk, _ := newLimiter(t)
	b, w := bucket(t), ratelimit.Window{N: 5, Size: 15 * time.Minute}
	clk.Advance(14*time.Minute + 50*time.Second) // 10 s before a window edge
	for i := 1; i <= 5; i++ {
		_, d := take(t, l, b, w)
		wantDecision(t, fmt.Sprintf("failure %d before the edge", i), d, true, 0)
	}
	clk.Advance(20 * time.Second) // 10 s after the edge
	for i := 1; i <= 5; i++ {
		_, d := take(t, l, b, w)
		wantDecision(t, fmt.Sprintf("guess %d after the edge", i), d, false, 15*time.Minute-20*time.Second)
	}
	clk.Advance(15*time.Minute - 20*time.Second - time.Microsecond)
	_, d := take(t, l, b, w)
	wantDecision(t, "a microsecond before the first failure leaves", d, false, time.Microsecond)
	clk.Advance(time.Microsecond)
	for i := 1; i <= 5; i++ {
		_, d := take(t, l, b, w)
		wantDecision(t, fmt.Sprintf("failure %d once they left", i), d, true, 0)
	}
}

// An attacker guessing every 10 s for two hours never gets more than five
// hits into any 15-minute interval.
func TestTakeNeverMoreThanNInAnyWindow(t *testing.T) {
	t.Parallel()
	l, clk, _ := newLimiter(t)
	b, w := bucket(t), ratelimit.Window{N: 5, Size: 15 * time.Minute}
	var allowed []time.Time
	for range 2 * 360 {
		if _, d := take(t, l, b, w); d.OK {
			allowed = append(allowed, clk.Now())
		}
		clk.Advance(10 * time.Second)
	}
	for i := range allowed {
		n := 0
		for _, at := range allowed[i:] {
			if at.Sub(allowed[i]) < w.Size {
				n++
			}
		}
		if n > w.N {
			t.Fatalf("%d hits allowed in the 15 minutes from %s", n, allowed[i])
		}
	}
	// Five every 15 minutes, as the limit says (not fewer).
	if want := 8 * 5; len(allowed) != want {
		t.Errorf("%d hits allowed in two hours, want %d", len(allowed), want)
	}
}

func TestTakeConcurrent(t *testing.T) {
	t.Parallel()
	l, _, _ := newLimiter(t)
	b, w := bucket(t), ratelimit.Window{N: 5, Size: time.Hour}
	allowed := concurrentHits(t, 40, func() (ratelimit.Decision, error) {
		_, d, err := l.Take(context.Background(), b, w)
		return d, err
	})
	if allowed != w.N {
		t.Errorf("%d of 40 concurrent hits allowed, want %d", allowed, w.N)
	}
}

func TestAllowConcurrent(t *testing.T) {
	t.Parallel()
	l, _, _ := newLimiter(t)
	b, r := bucket(t), ratelimit.Rate{N: 7, Per: time.Hour}
	allowed := concurrentHits(t, 40, func() (ratelimit.Decision, error) { return l.Allow(context.Background(), b, r) })
	if allowed != r.N {
		t.Errorf("%d of 40 concurrent hits allowed, want %d", allowed, r.N)
	}
}

func TestReturn(t *testing.T) {
	t.Parallel()
	l, clk, _ := newLimiter(t)
	ctx := context.Background()
	b, w := bucket(t), ratelimit.Window{N: 2, Size: time.Minute}
	first, _ := take(t, l, b, w)
	clk.Advance(time.Second)
	second, _ := take(t, l, b, w)
	if _, d := take(t, l, b, w); d.OK {
		t.Fatal("a third hit in a window of two was allowed")
	}
	if err := l.Return(ctx, second); err != nil {
		t.Fatal(err)
	}
	if err := l.Return(ctx, second); err != nil { // twice: nothing more is given back
		t.Fatal(err)
	}
	third, d := take(t, l, b, w)
	wantDecision(t, "after a return", d, true, 0)
	_, d = take(t, l, b, w)
	wantDecision(t, "full again", d, false, time.Minute-time.Second) // the first is still the oldest
	// Two hits at the same instant: returning one leaves the other.
	if err := l.Return(ctx, first); err != nil {
		t.Fatal(err)
	}
	n, _, err := l.Count(ctx, b, w)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d hits after returning the first, want 1 (%v)", n, third)
	}
	if err := l.Return(ctx, ratelimit.Hit{}); err != nil {
		t.Errorf("returning the zero Hit (a refused hit): %v", err)
	}
}

func TestRecordAndCount(t *testing.T) {
	t.Parallel()
	l, clk, _ := newLimiter(t)
	ctx := context.Background()
	b, w := bucket(t), ratelimit.Window{N: 1, Size: time.Hour}
	n, d, err := l.Count(ctx, b, w)
	if err != nil || n != 0 || !d.OK {
		t.Fatalf("an unknown bucket: %d %+v %v", n, d, err)
	}
	for range 3 { // Record never refuses, and keeps at most N
		if err := l.Record(ctx, b, w); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Minute)
	}
	n, d, err = l.Count(ctx, b, w)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || d.OK || d.RetryAfter != 59*time.Minute {
		t.Errorf("after three records a minute apart: %d hits, %+v; want 1, refused for 59m", n, d)
	}
	clk.Advance(59 * time.Minute)
	if n, _, _ := l.Count(ctx, b, w); n != 0 {
		t.Errorf("%d hits an hour after the last record, want 0", n)
	}
}

// Buckets are one row each however many hits they take, and Prune deletes
// exactly those that hold nothing any more.
func TestPrune(t *testing.T) {
	t.Parallel()
	// A database of its own: Prune deletes every idle bucket, the other
	// tests' too.
	l, clk, pool := limiterOn(pgtest.Fresh(t))
	ctx := context.Background()
	rate, window := ratelimit.Rate{N: 10, Per: time.Minute}, ratelimit.Window{N: 5, Size: 15 * time.Minute}
	short, long, tb := bucket(t), bucket(t), bucket(t)
	for range 50 {
		take(t, l, short, window)
		allow(t, l, tb, rate)
	}
	take(t, l, long, ratelimit.Window{N: 1, Size: time.Hour})
	rows := func(table string, buckets ...string) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE bucket = ANY($1)`, buckets).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var size int
	if err := pool.QueryRow(ctx, `SELECT cardinality(hits) FROM rate_windows WHERE bucket = $1`, short).Scan(&size); err != nil {
		t.Fatal(err)
	}
	if size != window.N || rows("rate_windows", short) != 1 || rows("rate_buckets", tb) != 1 {
		t.Fatalf("after 50 hits: %d rows of %d hits, %d token bucket rows; want one row of %d, one row",
			rows("rate_windows", short), size, rows("rate_buckets", tb), window.N)
	}

	prune := func(batch int, want map[string]int64) {
		t.Helper()
		deleted, err := l.Prune(ctx, clk.Now(), batch)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(deleted) != fmt.Sprint(want) {
			t.Errorf("Prune deleted %v, want %v", deleted, want)
		}
	}

	// The token bucket is empty for another minute: nothing is pruned.
	clk.Advance(time.Second)
	prune(10, map[string]int64{"rate_buckets": 0, "rate_windows": 0})
	if rows("rate_buckets", tb) != 1 || rows("rate_windows", short, long) != 2 {
		t.Fatal("Prune deleted buckets that still hold hits")
	}
	wantDecision(t, "the token bucket after Prune", allow(t, l, tb, rate), false, 5*time.Second)

	// Full again: the token bucket goes, and a new hit starts a full bucket.
	clk.Advance(2 * time.Minute)
	prune(10, map[string]int64{"rate_buckets": 1, "rate_windows": 0})
	if rows("rate_buckets", tb) != 0 || rows("rate_windows", short, long) != 2 {
		t.Fatalf("after a full refill: %d token bucket rows, %d windows; want 0 and 2", rows("rate_buckets", tb), rows("rate_windows", short, long))
	}
	// 15 minutes after its last hit the short window goes, the long stays.
	clk.Advance(15 * time.Minute)
	prune(10, map[string]int64{"rate_buckets": 0, "rate_windows": 1})
	if rows("rate_windows", short) != 0 || rows("rate_windows", long) != 1 {
		t.Fatal("Prune kept an idle window, or deleted a live one")
	}
	_, d := take(t, l, long, ratelimit.Window{N: 1, Size: time.Hour})
	if d.OK {
		t.Error("the long window forgot its hit")
	}
}

// Prune deletes in batches: more idle buckets than one batch all go, and
// each table's count is every row deleted.
func TestPruneInBatches(t *testing.T) {
	t.Parallel()
	l, clk, _ := limiterOn(pgtest.Fresh(t)) // Prune deletes every idle bucket
	ctx := context.Background()
	for range 5 {
		allow(t, l, bucket(t), ratelimit.Rate{N: 1, Per: time.Second})
		take(t, l, bucket(t), ratelimit.Window{N: 1, Size: time.Second})
	}
	live := bucket(t)
	take(t, l, live, ratelimit.Window{N: 1, Size: time.Hour})
	clk.Advance(time.Minute)
	deleted, err := l.Prune(ctx, clk.Now(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(deleted) != fmt.Sprint(map[string]int64{"rate_buckets": 5, "rate_windows": 5}) {
		t.Errorf("Prune in batches of 2 deleted %v, want 5 of each", deleted)
	}
	if n, _, _ := l.Count(ctx, live, ratelimit.Window{N: 1, Size: time.Hour}); n != 1 {
		t.Errorf("the live window holds %d hits after Prune, want 1", n)
	}
	if _, err := l.Prune(ctx, clk.Now(), 0); err == nil {
		t.Error("Prune with a batch of 0 rows did not fail")
	}
}

// A bucket hit while Prune runs stays: Prune skips the row the hit holds,
// rather than wait for it (with the rows it deleted so far locked).
func TestPruneKeepsABucketHitMeanwhile(t *testing.T) {
	t.Parallel()
	l, clk, pool := limiterOn(pgtest.Fresh(t))
	ctx := context.Background()
	b := bucket(t)
	allow(t, l, b, ratelimit.Rate{N: 1, Per: time.Second})
	clk.Advance(time.Minute) // idle now
	// A hit in flight: its transaction holds the row while Prune runs.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	hitTAT := clk.Now().Add(time.Second)
	if _, err := tx.Exec(ctx, `UPDATE rate_buckets SET tat = $2 WHERE bucket = $1`, b, hitTAT); err != nil {
		t.Fatal(err)
	}
	// Prune skips the row the hit holds (SKIP LOCKED): it neither waits
	// for the hit nor deletes the bucket under it.
	deleted, err := l.Prune(ctx, clk.Now(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if deleted["rate_buckets"] != 0 {
		t.Errorf("Prune deleted %v: the bucket hit meanwhile went", deleted)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var tat time.Time
	if err := pool.QueryRow(ctx, `SELECT tat FROM rate_buckets WHERE bucket = $1`, b).Scan(&tat); err != nil {
		t.Fatalf("the bucket hit meanwhile: %v", err)
	}
	if !tat.Equal(hitTAT) {
		t.Errorf("the bucket's tat is %v, want the hit's %v", tat, hitTAT)
	}
}

func TestInvalidLimits(t *testing.T) {
	t.Parallel()
	l, _, _ := newLimiter(t)
	ctx := context.Background()
	if _, err := l.Allow(ctx, "x", ratelimit.Rate{}); err == nil {
		t.Error("Allow with a zero Rate: no error")
	}
	if _, _, err := l.Take(ctx, "x", ratelimit.Window{N: 1}); err == nil {
		t.Error("Take with a zero-length Window: no error")
	}
	if _, err := l.Charge(ctx, "x", ratelimit.Rate{N: 1, Per: time.Second}, -1, 0); err == nil {
		t.Error("Charge of -1 units: no error")
	}
}

func TestAddressKey(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"192.0.2.7":                      "192.0.2.7",
		"::ffff:192.0.2.7":               "192.0.2.7",
		"2001:db8:1:2:3:4:5:6":           "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff:ffff:ffff:ff": "2001:db8:1:2::/64",
		"fe80::1%eth0":                   "fe80::/64",
		"@":                              "@", // a unix socket's peer
	} {
		if got := ratelimit.AddressKey(in); got != want {
			t.Errorf("AddressKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// concurrentHits makes n hits at once and counts those allowed.
func concurrentHits(t *testing.T, n int, hit func() (ratelimit.Decision, error)) int {
	t.Helper()
	var mu sync.Mutex
	allowed := 0
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			d, err := hit()
			if err != nil {
				t.Error(err)
				return
			}
			if d.OK {
				mu.Lock()
				allowed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return allowed
}
