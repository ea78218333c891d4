// Package ratelimit keeps rate limits in PostgreSQL, so that every replica
// of the service sees the same counts.
//
// Two kinds of bucket, neither with fixed windows (whose edges let twice the
// limit through in a moment):
//
//   - Rate, a token bucket (GCRA): N tokens, refilled at N per Per. For
//     throughput limits (requests per client address, joins per user), where
//     a burst of N is welcome.
//   - Window, a sliding window: at most N hits in any interval of length
//     Size. For failure counts (wrong passwords, wrong codes), where the
//     bound must hold over every interval: a token bucket of N per Size lets
//     2N-1 through in one Size (a burst of N, then the refill).
//
// Each bucket is one row, updated atomically by one statement (INSERT … ON
// CONFLICT DO UPDATE … RETURNING), so concurrent hits on any replica never
// overshoot, and a bucket's row never grows with its traffic: a Window row
// holds at most N times. Retry-After is exact: the moment the next hit would
// be allowed.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/pgbatch"
)

// Rate is a token bucket: N tokens, refilled at N per Per.
type Rate struct {
	N   int
	Per time.Duration
}

// Window is a sliding window: at most N hits in any interval of length Size.
type Window struct {
	N    int
	Size time.Duration
}

// Decision is the outcome of a hit. RetryAfter, when the hit was refused, is
// how long until the same hit would be allowed.
type Decision struct {
	OK         bool
	RetryAfter time.Duration
}

// Hit is a hit a Window counted, which Return can take back.
type Hit struct {
	bucket string
	at     time.Time
}

// Limiter keeps buckets in db, on the clock now.
type Limiter struct {
	db  *pgxpool.Pool
	now func() time.Time
}

// New returns a limiter on db. now is the clock (nil: time.Now).
func New(db *pgxpool.Pool, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{db: db, now: now}
}

// KeyedBy is the SQL condition that a bucket is keyed by $1 (an e-mail
// address): it ends with it after a bucket's separator
// ("login-fail:<key>", "login-ok:<client> <key>"), not with another key
// that ends the same way (ob@example.com is not bob@example.com). Erasure
// deletes these buckets, and the export shows them.
const KeyedBy = `right(bucket, length($1) + 1) IN (':' || $1, ' ' || $1)`

// PostgreSQL keeps microseconds: times and intervals are rounded to them in
// Go, so that what is stored is what was computed.
func (l *Limiter) clock() time.Time { return l.now().UTC().Truncate(time.Microsecond) }

func micros(d time.Duration) int64 { return int64(d / time.Microsecond) }

// interval is the GCRA emission interval Per/N, rounded up to a microsecond
// so that rounding never lets more than N per Per through.
func (r Rate) interval() time.Duration {
	t := r.Per / time.Duration(r.N)
	if t%time.Microsecond != 0 || t*time.Duration(r.N) < r.Per {
		t = t.Truncate(time.Microsecond) + time.Microsecond
	}
	return t
}

func (r Rate) validate() error {
	if r.N < 1 || r.Per < time.Microsecond {
		return fmt.Errorf("ratelimit: invalid rate %d per %s", r.N, r.Per)
	}
	return nil
}

func (w Window) validate() error {
	if w.N < 1 || w.Size < time.Microsecond {
		return fmt.Errorf("ratelimit: invalid window %d per %s", w.N, w.Size)
	}
	return nil
}

// Allow takes a token from bucket, a token bucket of rate r.
//
// GCRA: tat, the theoretical arrival time, moves on by T = Per/N with every
// hit allowed; a hit at now is allowed when max(tat, now) + T - now <= N*T,
// which is a full bucket of N tokens refilled at one per T. A refused hit
// leaves tat alone, so hammering an empty bucket does not push its refill
// further away.
func (l *Limiter) Allow(ctx context.Context, bucket string, r Rate) (Decision, error) {
	if err := r.validate(); err != nil {
		return Decision{}, err
	}
	now, t := l.clock(), r.interval()
	var tat time.Time
	var ok bool
	err := l.db.QueryRow(ctx, `
		INSERT INTO rate_buckets AS b (bucket, tat, allowed)
		VALUES ($1, $2::timestamptz + $3 * interval '1 microsecond', true)
		ON CONFLICT (bucket) DO UPDATE SET
			allowed = greatest(b.tat, $2) + $3 * interval '1 microsecond' <= $2::timestamptz + $4 * interval '1 microsecond',
			tat = CASE WHEN greatest(b.tat, $2) + $3 * interval '1 microsecond' <= $2::timestamptz + $4 * interval '1 microsecond'
				THEN greatest(b.tat, $2) + $3 * interval '1 microsecond' ELSE b.tat END
		RETURNING tat, allowed`, bucket, now, micros(t), micros(t)*int64(r.N)).Scan(&tat, &ok)
	if err != nil {
		return Decision{}, fmt.Errorf("ratelimit: allow %q: %w", bucket, err)
	}
	if ok {
		return Decision{OK: true}, nil
	}
	// The next hit is allowed once tat + T - now' <= N*T.
	return Decision{RetryAfter: tat.Add(t - t*time.Duration(r.N)).Sub(now)}, nil
}

// Charge draws from bucket, a token bucket of r (N units, refilled at N
// per Per), units a write already used: they are always counted, even
// beyond the bucket (a debt, which later hits wait out). Then it takes want
// units more ahead, if the bucket still holds them. A meter that sells
// leases uses it: owed is what it used beyond its last lease, want the next
// lease. OK reports that the lease was taken; when it was not, RetryAfter is
// when it would be.
//
// Units count at Per/N each, rounded up to a microsecond as a whole, so that
// a unit costs no more than its share however small it is.
func (l *Limiter) Charge(ctx context.Context, bucket string, r Rate, owed, want int64) (Decision, error) {
	if err := r.validate(); err != nil {
		return Decision{}, err
	}
	if owed < 0 || want < 0 {
		return Decision{}, fmt.Errorf("ratelimit: charge %d and %d units", owed, want)
	}
	now := l.clock()
	owedT, wantT := r.cost(owed), r.cost(want)
	var tat time.Time
	var ok bool
	err := l.db.QueryRow(ctx, `
		INSERT INTO rate_buckets AS b (bucket, tat, allowed)
		VALUES ($1, $2::timestamptz + CASE WHEN $3::bigint + $4::bigint <= $5::bigint THEN $3 + $4 ELSE $3 END * interval '1 microsecond', $3 + $4 <= $5)
		ON CONFLICT (bucket) DO UPDATE SET
			allowed = greatest(b.tat, $2) + ($3 + $4) * interval '1 microsecond' <= $2::timestamptz + $5 * interval '1 microsecond',
			tat = greatest(b.tat, $2) + CASE WHEN greatest(b.tat, $2) + ($3 + $4) * interval '1 microsecond' <= $2::timestamptz + $5 * interval '1 microsecond'
				THEN $3 + $4 ELSE $3 END * interval '1 microsecond'
		RETURNING tat, allowed`, bucket, now, micros(owedT), micros(wantT), micros(r.Per)).Scan(&tat, &ok)
	if err != nil {
		return Decision{}, fmt.Errorf("ratelimit: charge %q: %w", bucket, err)
	}
	if ok {
		return Decision{OK: true}, nil
	}
	// The lease fits once tat + want - now' <= Per.
	return Decision{RetryAfter: tat.Add(wantT - r.Per).Sub(now)}, nil
}

// cost is what n units take of the bucket: n*Per/N, rounded up to a
// microsecond, computed on 128 bits; a cost past maxCost (a debt of
// centuries) is maxCost.
func (r Rate) cost(n int64) time.Duration {
	if n == 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(n), uint64(micros(r.Per)))
	if hi >= uint64(r.N) {
		return maxCost
	}
	us, rem := bits.Div64(hi, lo, uint64(r.N))
	if rem != 0 {
		us++
	}
	if us > uint64(maxCost/time.Microsecond) {
		return maxCost
	}
	return time.Duration(us) * time.Microsecond
}

// maxCost bounds a charge: a hundred years, far past any bucket's period,
// and far inside what a time.Duration and PostgreSQL's timestamps hold.
const maxCost = 100 * 365 * 24 * time.Hour

// live is the hits of w.hits still inside the window ending at $2, of size
// $4 microseconds, oldest first.
const live = `ARRAY(SELECT h FROM unnest(w.hits) AS h WHERE h > $2::timestamptz - $4 * interval '1 microsecond' ORDER BY h)`

// Take counts a hit in bucket, a sliding window w, unless w already holds
// w.N hits; then the hit is refused and not counted, and RetryAfter is when
// the oldest hit leaves the window. The Hit can be given back with Return.
func (l *Limiter) Take(ctx context.Context, bucket string, w Window) (Hit, Decision, error) {
	if err := w.validate(); err != nil {
		return Hit{}, Decision{}, err
	}
	now := l.clock()
	var hits []time.Time
	var ok bool
	err := l.db.QueryRow(ctx, `
		INSERT INTO rate_windows AS w (bucket, hits, idle_at, allowed)
		VALUES ($1, ARRAY[$2::timestamptz], $2::timestamptz + $4 * interval '1 microsecond', true)
		ON CONFLICT (bucket) DO UPDATE SET
			allowed = cardinality(`+live+`) < $3,
			hits = CASE WHEN cardinality(`+live+`) < $3 THEN `+live+` || $2::timestamptz ELSE `+live+` END,
			idle_at = CASE WHEN cardinality(`+live+`) < $3
				THEN greatest(w.idle_at, $2::timestamptz + $4 * interval '1 microsecond') ELSE w.idle_at END
		RETURNING hits, allowed`, bucket, now, w.N, micros(w.Size)).Scan(&hits, &ok)
	if err != nil {
		return Hit{}, Decision{}, fmt.Errorf("ratelimit: take %q: %w", bucket, err)
	}
	if ok {
		return Hit{bucket: bucket, at: now}, Decision{OK: true}, nil
	}
	return Hit{}, Decision{RetryAfter: hits[0].Add(w.Size).Sub(now)}, nil
}

// Return takes back a hit Take counted (a login that succeeded was not a
// failure after all). A hit no longer in its window is gone already.
func (l *Limiter) Return(ctx context.Context, h Hit) error {
	if h.bucket == "" {
		return nil
	}
	_, err := l.db.Exec(ctx, `
		UPDATE rate_windows SET hits = hits[:array_position(hits, $2::timestamptz) - 1] || hits[array_position(hits, $2::timestamptz) + 1:]
		WHERE bucket = $1 AND $2::timestamptz = ANY (hits)`, h.bucket, h.at)
	if err != nil {
		return fmt.Errorf("ratelimit: return a hit of %q: %w", h.bucket, err)
	}
	return nil
}

// Record counts a hit in bucket, a sliding window w, whatever it holds: the
// oldest hits beyond w.N are dropped. It remembers that something happened
// recently (Count tells), without limiting it.
func (l *Limiter) Record(ctx context.Context, bucket string, w Window) error {
	if err := w.validate(); err != nil {
		return err
	}
	_, err := l.db.Exec(ctx, `
		INSERT INTO rate_windows AS w (bucket, hits, idle_at, allowed)
		VALUES ($1, ARRAY[$2::timestamptz], $2::timestamptz + $4 * interval '1 microsecond', true)
		ON CONFLICT (bucket) DO UPDATE SET
			hits = (`+live+` || $2::timestamptz)[greatest(cardinality(`+live+`) + 2 - $3, 1):],
			idle_at = greatest(w.idle_at, $2::timestamptz + $4 * interval '1 microsecond'),
			allowed = true`, bucket, l.clock(), w.N, micros(w.Size))
	if err != nil {
		return fmt.Errorf("ratelimit: record %q: %w", bucket, err)
	}
	return nil
}

// Count is how many hits bucket, a sliding window w, holds now, and whether
// a Take would be allowed, without counting one.
func (l *Limiter) Count(ctx context.Context, bucket string, w Window) (int, Decision, error) {
	if err := w.validate(); err != nil {
		return 0, Decision{}, err
	}
	now := l.clock()
	var hits []time.Time
	err := l.db.QueryRow(ctx, `SELECT hits FROM rate_windows WHERE bucket = $1`, bucket).Scan(&hits)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, Decision{OK: true}, nil
	}
	if err != nil {
		return 0, Decision{}, fmt.Errorf("ratelimit: count %q: %w", bucket, err)
	}
	var in []time.Time
	for _, h := range hits {
		if h.After(now.Add(-w.Size)) {
			in = append(in, h)
		}
	}
	if len(in) < w.N {
		return len(in), Decision{OK: true}, nil
	}
	return len(in), Decision{RetryAfter: in[len(in)-w.N].Add(w.Size).Sub(now)}, nil
}

// idle are the tables Prune purges and, for each, what makes a row hold
// nothing from $1 on: a token bucket full again by then, a window whose
// newest hit has left it by then.
var idle = []struct{ table, where string }{
	{"rate_buckets", "tat <= $1"},
	{"rate_windows", "idle_at <= $1"},
}

// pruneStatementTimeout bounds one DELETE of Prune: one that cannot run
// fails the prune, which its next run does again.
const pruneStatementTimeout = 30 * time.Second

// Prune deletes the buckets that hold nothing from cutoff on, at most batch
// rows per DELETE (so that none holds a long transaction), and returns how
// many rows went from each table, those of the DELETEs that completed when
// it fails. A bucket that is gone is the same as a full or empty one, so
// Prune(ctx, now, n) changes no decision; a bucket hit while its batch is
// deleted has a new row version, which the DELETE leaves alone.
func (l *Limiter) Prune(ctx context.Context, cutoff time.Time, batch int) (map[string]int64, error) {
	if batch < 1 {
		return nil, fmt.Errorf("ratelimit: prune batch %d is not positive", batch)
	}
	deleted := map[string]int64{}
	for _, p := range idle {
		// A bucket a hit holds waits for the next prune (pgbatch: SKIP
		// LOCKED), and the hits on the buckets deleted so far never wait
		// for it.
		n, err := pgbatch.Delete(ctx, l.db, p.table, p.where, cutoff, batch, pruneStatementTimeout, nil)
		deleted[p.table] += n
		if err != nil {
			return deleted, fmt.Errorf("ratelimit: prune %s: %w", p.table, err)
		}
	}
	return deleted, nil
}

// AddressKey is the part of a client address limits are kept by: an IPv4
// address whole, an IPv6 address by its /64 (one subscriber's usual
// allocation, which would otherwise be 2^64 fresh addresses). Anything
// else is kept as it is.
func AddressKey(addr string) string {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is4() {
		return ip.String()
	}
	prefix, err := ip.Prefix(64)
	if err != nil {
		return addr
	}
	return prefix.String()
}
