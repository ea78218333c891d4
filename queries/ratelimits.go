package queries

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"lectern/ratelimit"
)

// RateRecord is a rate limit's record of a user's attempts: the times of
// the hits its sliding window still holds.
type RateRecord struct {
	// Kind is what was attempted: "login-ok" (a login that succeeded from
	// ClientAddress, remembered so that the address is known), "login-fail",
	// "verify-fail" (a wrong e-mail code), "send-code", "join-fail" (a
	// wrong invite code).
	Kind string
	// ClientAddress is the address the attempts came from, for the records
	// kept per address and account; nil for those of the account alone.
	ClientAddress *string
	Times         []time.Time
}

// RateRecordsOf reads the rate-limit windows that hold a user's attempts:
// those keyed by their e-mail address (ratelimit.KeyedBy) and the buckets
// named (those keyed by the user's id), in bucket order.
func (q *DB) RateRecordsOf(ctx context.Context, email string, buckets ...string) ([]RateRecord, error) {
	// A window whose hits were all given back (a right code, a code the
	// mail server refused) records no attempt: it is left out.
	rows, err := q.pool.Query(ctx, `SELECT bucket, hits FROM rate_windows WHERE (`+ratelimit.KeyedBy+` OR bucket = ANY($2))
		AND cardinality(hits) > 0 ORDER BY bucket`, email, buckets)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (RateRecord, error) {
		var bucket string
		var r RateRecord
		if err := row.Scan(&bucket, &r.Times); err != nil {
			return r, err
		}
		kind, rest, _ := strings.Cut(bucket, ":")
		r.Kind = kind
		// "<kind>:<client> <address>" is kept per client address.
		if client, _, ok := strings.Cut(rest, " "); ok {
			r.ClientAddress = &client
		}
		return r, nil
	})
}

// RateBucket is a token bucket keyed by a user's id: when it is full again
// (FullAt; until then the user has spent some of its allowance).
type RateBucket struct {
	// Kind is what the bucket limits: "turns" (practice turns), "join-user"
	// (class joins).
	Kind   string
	FullAt time.Time
}

// RateBucketsOf reads the token buckets named, those that exist, in bucket
// order.
func (q *DB) RateBucketsOf(ctx context.Context, buckets ...string) ([]RateBucket, error) {
	rows, err := q.pool.Query(ctx, `SELECT bucket, tat FROM rate_buckets WHERE bucket = ANY($1) ORDER BY bucket`, buckets)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (RateBucket, error) {
		var bucket string
		var b RateBucket
		err := row.Scan(&bucket, &b.FullAt)
		b.Kind, _, _ = strings.Cut(bucket, ":")
		return b, err
	})
}
