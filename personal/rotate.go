package personal

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Rotating the master key.
//
// Every replica is restarted with the new master key as LECTERN_DATA_KEY and
// the old one as LECTERN_DATA_KEY_PREVIOUS (NewRotatingKeys): each reads keys
// wrapped by either and makes new ones under the new key, so that no key is
// made under the old one once rotation starts. Rewrap then wraps every key
// still under the old master key under the new one. Once it reports none
// left, the replicas drop LECTERN_DATA_KEY_PREVIOUS. The subjects' keys,
// and so every event, stay as they are: only their wrapping changes.

// rewrapCheck wraps the master key's check row (Verify) under the current
// master key, if the previous one wrapped it: after the rotation, processes
// that know the current key alone verify against it. It is no subject's
// key, and no report counts it.
func (k *Keys) rewrapCheck(ctx context.Context) error {
	wrapped, err := k.load(ctx, checkSubject)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	raw, byPrevious, err := k.unwrapRaw(checkSubject, wrapped)
	if err != nil {
		return fmt.Errorf("the master key check: %w", err)
	}
	defer clear(raw)
	if !byPrevious {
		return nil
	}
	rewrapped, err := k.wrap(checkSubject, raw)
	if err != nil {
		return err
	}
	_, err = k.db.Exec(ctx, `UPDATE subject_keys SET wrapped = $3 WHERE subject = $1 AND wrapped = $2`, checkSubject, wrapped, rewrapped)
	return err
}

// rewrapRead, when set (by tests), runs between a batch's read and its
// write.
var rewrapRead func()

// RewrapReport is what Rewrap found in subject_keys.
type RewrapReport struct {
	Rewrapped int // wrapped under the previous master key, now under the current one
	Current   int // under the current master key already
	Erased    int // tombstones (nothing to wrap)
	// Changed are keys whose rows changed between the read and the write
	// (erased, or rewrapped by another run): not written; a run after
	// this one counts them.
	Changed int
	// Unreadable are the subjects whose keys neither master key opens
	// (the first few), of UnreadableCount: Rewrap leaves them as they are.
	Unreadable      []string
	UnreadableCount int
}

// rewrapBatch is how many keys Rewrap reads and writes a statement.
const rewrapBatch = 1000

// maxUnreadableNamed bounds the subjects a report names.
const maxUnreadableNamed = 10

// ErrNoPreviousKey is Rewrap on keys that know no previous master key.
var ErrNoPreviousKey = errors.New("personal: no previous master key to rewrap from (LECTERN_DATA_KEY_PREVIOUS)")

// Rewrap wraps under the current master key every subject key that the
// previous master key wrapped, a batch at a time, in subject order. Each
// key is replaced only if its row still holds what was read: a subject
// erased meanwhile stays erased, and a key another run rewrapped first is
// left alone. It may run while replicas serve, and again (what is current
// is counted, not written).
func (k *Keys) Rewrap(ctx context.Context) (RewrapReport, error) {
	var rep RewrapReport
	if k.previous == nil {
		return rep, ErrNoPreviousKey
	}
	if err := k.rewrapCheck(ctx); err != nil {
		return rep, err
	}
	after := ""
	for {
		n, last, err := k.rewrapBatch(ctx, after, &rep)
		if err != nil {
			return rep, err
		}
		if n < rewrapBatch {
			return rep, nil
		}
		after = last
	}
}

// MaxRewrapPasses bounds the passes RewrapAll makes.
const MaxRewrapPasses = 3

// ErrKeysKeepComing is RewrapAll finding keys under the previous master key
// in every pass: a process still makes keys under it alone.
var ErrKeysKeepComing = errors.New("personal: every pass found subject keys under the previous master key: is a process running with the old key alone?")

// RewrapAll runs Rewrap until a whole pass finds no key under the previous
// master key, at most MaxRewrapPasses times, and returns how many keys it
// rewrapped in all and the last pass's report. Each pass's report goes to
// report as well. It stops at a pass that finds keys neither master key
// opens (its report names them).
func (k *Keys) RewrapAll(ctx context.Context, report func(pass int, rep RewrapReport)) (int, RewrapReport, error) {
	rewrapped := 0
	for pass := 1; ; pass++ {
		rep, err := k.Rewrap(ctx)
		rewrapped += rep.Rewrapped
		report(pass, rep)
		switch {
		case err != nil, rep.UnreadableCount > 0:
			return rewrapped, rep, err
		case rep.Rewrapped == 0 && rep.Changed == 0:
			return rewrapped, rep, nil
		case pass == MaxRewrapPasses:
			return rewrapped, rep, ErrKeysKeepComing
		}
	}
}

// rewrapBatch rewraps the batch of keys after the subject after, and
// returns how many rows it read and the last subject.
func (k *Keys) rewrapBatch(ctx context.Context, after string, rep *RewrapReport) (int, string, error) {
	rows, err := k.db.Query(ctx, `SELECT subject, wrapped FROM subject_keys WHERE subject > $1 AND subject <> $3 ORDER BY subject LIMIT $2`,
		after, rewrapBatch, checkSubject)
	if err != nil {
		return 0, "", err
	}
	var subjects []string
	var olds, news [][]byte
	n, last := 0, after
	for rows.Next() {
		var subject string
		var wrapped []byte
		if err := rows.Scan(&subject, &wrapped); err != nil {
			rows.Close()
			return 0, "", err
		}
		n, last = n+1, subject
		if wrapped == nil {
			rep.Erased++
			continue
		}
		raw, byPrevious, err := k.unwrapRaw(subject, wrapped)
		switch {
		case err != nil:
			if rep.UnreadableCount++; len(rep.Unreadable) < maxUnreadableNamed {
				rep.Unreadable = append(rep.Unreadable, subject)
			}
			continue
		case !byPrevious:
			clear(raw)
			rep.Current++
			continue
		}
		rewrapped, err := k.wrap(subject, raw)
		clear(raw)
		if err != nil {
			rows.Close()
			return 0, "", err
		}
		subjects, olds, news = append(subjects, subject), append(olds, wrapped), append(news, rewrapped)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, "", err
	}
	if rewrapRead != nil {
		rewrapRead()
	}
	if len(subjects) == 0 {
		return n, last, nil
	}
	// The rows are locked in subject order first, as every run locks
	// them: two runs at once wait for each other instead of deadlocking.
	var written int64
	err = pgx.BeginFunc(ctx, k.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM subject_keys WHERE subject = ANY($1) ORDER BY subject FOR UPDATE`, subjects); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE subject_keys s SET wrapped = v.rewrapped
			FROM unnest($1::text[], $2::bytea[], $3::bytea[]) AS v(subject, old, rewrapped)
			WHERE s.subject = v.subject AND s.wrapped = v.old`, subjects, olds, news)
		written = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, "", fmt.Errorf("personal: rewrap: %w", err)
	}
	rep.Rewrapped += int(written)
	rep.Changed += len(subjects) - int(written)
	return n, last, nil
}
