package blobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"lectern/events"
	"lectern/eventstore"
)

// Defaults of Sweep.
const (
	// RefGrace is how long a ref whose document is not recorded is left
	// alone: its upload may still be appending the document's event. A
	// write is bounded to a minute (api.DefaultWriteWait); an hour is far
	// past it. The ref's age is read on the database's clock, which wrote
	// it, so replicas' clocks do not matter.
	RefGrace = time.Hour
	// SweepLimit is the refs one page of a Sweep reads (and holds in
	// memory) at a time; a Sweep reads page after page until the backlog
	// is done.
	SweepLimit = 1000
	// sweepErrors bounds the errors a Sweep returns: those of the first
	// refs it skipped, and how many more it skipped.
	sweepErrors = 3
)

// Recorded reports whether the knowledge document knowledgeID is recorded:
// whether its upload's append succeeded. It must return once ctx ends.
type Recorded func(ctx context.Context, knowledgeID int64) (bool, error)

// RecordedIn is Recorded as store tells it: the document's stream
// (knowledge-<id>) holds an event. It works on either event store.
func RecordedIn(store eventstore.Store) Recorded {
	return func(ctx context.Context, knowledgeID int64) (bool, error) {
		evs, err := store.ReadStream(ctx, eventstore.StreamName(events.CategoryKnowledge, knowledgeID), eventstore.Forwards, 1, 1)
		if err != nil {
			return false, fmt.Errorf("blobs: is knowledge document %d recorded: %w", knowledgeID, err)
		}
		return len(evs) > 0, nil
	}
}

// Swept is what a Sweep did.
type Swept struct {
	Refs  int64 // rows of document_blob_refs deleted
	Blobs int64 // rows of document_blobs deleted
	// Skipped is the refs whose check or transaction failed: left as they
	// were, for the next Sweep.
	Skipped int64
}

// sweepRef is a ref as a page of the sweep reads it, in its keyset order.
type sweepRef struct {
	CreatedAt   time.Time
	Owner       int64
	Hash        string
	KnowledgeID int64
}

// The pages of a Sweep: refs not found recorded, created before the
// sweep's cutoff ($1), in keyset order; the first page, then the pages
// after the last ref seen ($3 to $6). They read the index
// document_blob_refs_unrecorded (created_at, where NOT recorded).
const (
	sweepFirstPage = `SELECT created_at, owner_id, hash, knowledge_id FROM document_blob_refs
		WHERE NOT recorded AND created_at < $1
		ORDER BY created_at, owner_id, hash, knowledge_id LIMIT $2`
	sweepNextPage = `SELECT created_at, owner_id, hash, knowledge_id FROM document_blob_refs
		WHERE NOT recorded AND created_at < $1
		AND (created_at, owner_id, hash, knowledge_id) > ($3, $4, $5, $6)
		ORDER BY created_at, owner_id, hash, knowledge_id LIMIT $2`
)

// Sweep works through the backlog of refs that are older than olderThan
// (RefGrace) when it starts, on the database's clock, and that it has not
// yet found recorded: page after page of limit refs, oldest first, each
// page the refs after the last one seen (keyset order: created_at, owner,
// hash, knowledge id), so that one call reads each ref of the backlog once,
// however long it is. A ref whose document is recorded is marked so, for
// good (it keeps its blob until the owner's erasure, and is not looked at
// again); one whose document is not was left by an upload whose append
// failed: Sweep deletes it, and the blob with it when no ref of the blob
// is left. A blob stored before refs were (refs_complete false) is never
// deleted. Each ref is deleted in a transaction of its own, under its
// blob's lock (lockBlob); no transaction or connection is held while
// recorded reads the event store.
//
// Each operation runs within timeout: the read of the cutoff and of each
// page, each ref's check (recorded), the statement that marks a ref
// recorded, and each ref's transaction (its lock, deletes and commit, all
// told). A ref whose check or statements fail (or run past timeout) is
// skipped, left as it was until the next Sweep, and Sweep goes on with the
// next; so a ref that always fails holds back none after it. The sweep
// stops when ctx ends, or when a page cannot be read (the next Sweep starts
// again from the oldest ref). Sweep returns what it did, with the errors of
// the first few refs it skipped and the error it stopped at, if any.
//
// Several replicas each running Sweep at once do the same work twice,
// which is harmless: every delete checks again, under the blob's lock,
// that its ref is still unrecorded and past its grace, so each row goes
// once, and marking a ref recorded twice marks it once.
func Sweep(ctx context.Context, db DB, recorded Recorded, olderThan time.Duration, limit int, timeout time.Duration) (Swept, error) {
	var swept Swept
	if limit <= 0 || timeout <= 0 {
		return swept, fmt.Errorf("blobs: sweep: limit %d, timeout %v: want both positive", limit, timeout)
	}
	var errs []error
	result := func(stop error) error {
		if more := swept.Skipped - int64(len(errs)); more > 0 {
			errs = append(errs, fmt.Errorf("%d more refs skipped", more))
		}
		if stop != nil {
			errs = append(errs, stop)
		}
		if len(errs) == 0 {
			return nil
		}
		return fmt.Errorf("blobs: sweep: %d refs skipped: %w", swept.Skipped, errors.Join(errs...))
	}
	// The backlog is what is past the grace now: refs that pass it while
	// the sweep runs are the next one's, so that a sweep ends.
	var cutoff time.Time
	if err := within(ctx, timeout, func(ctx context.Context) error {
		return db.QueryRow(ctx, `SELECT now() - make_interval(secs => $1)`, olderThan.Seconds()).Scan(&cutoff)
	}); err != nil {
		return swept, result(err)
	}
	var last *sweepRef
	for {
		var refs []sweepRef
		err := within(ctx, timeout, func(ctx context.Context) error {
			var rows pgx.Rows
			var err error
			if last == nil {
				rows, err = db.Query(ctx, sweepFirstPage, cutoff, limit)
			} else {
				rows, err = db.Query(ctx, sweepNextPage, cutoff, limit, last.CreatedAt, last.Owner, last.Hash, last.KnowledgeID)
			}
			if err != nil {
				return err
			}
			refs, err = pgx.CollectRows(rows, pgx.RowToStructByPos[sweepRef])
			return err
		})
		if err != nil {
			return swept, result(err)
		}
		for _, r := range refs {
			if err := ctx.Err(); err != nil {
				return swept, result(err)
			}
			refsDeleted, blobsDeleted, err := sweepOne(ctx, db, recorded, r, olderThan, timeout)
			if err != nil {
				if ctx.Err() != nil {
					// Not the ref's failure: the sweep's end.
					return swept, result(ctx.Err())
				}
				swept.Skipped++
				if len(errs) < sweepErrors {
					errs = append(errs, err)
				}
				continue
			}
			swept.Refs += refsDeleted
			swept.Blobs += blobsDeleted
		}
		if len(refs) < limit {
			return swept, result(nil)
		}
		last = &refs[len(refs)-1]
	}
}

// sweepOne checks the ref r and marks it recorded, or deletes it (and its
// blob with its last ref), each step within timeout. It returns the refs
// and blobs it deleted.
func sweepOne(ctx context.Context, db DB, recorded Recorded, r sweepRef, olderThan, timeout time.Duration) (refs, blobs int64, err error) {
	var ok bool
	if err := within(ctx, timeout, func(ctx context.Context) error {
		var err error
		ok, err = recorded(ctx, r.KnowledgeID)
		return err
	}); err != nil {
		return 0, 0, fmt.Errorf("ref of knowledge document %d: %w", r.KnowledgeID, err)
	}
	if ok {
		if err := within(ctx, timeout, func(ctx context.Context) error {
			_, err := db.Exec(ctx, `UPDATE document_blob_refs SET recorded = true
				WHERE owner_id = $1 AND hash = $2 AND knowledge_id = $3`, r.Owner, r.Hash, r.KnowledgeID)
			return err
		}); err != nil {
			return 0, 0, fmt.Errorf("marking the ref of knowledge document %d recorded: %w", r.KnowledgeID, err)
		}
		return 0, 0, nil
	}
	err = within(ctx, timeout, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, lockBlob, r.Owner, r.Hash); err != nil {
				return err
			}
			// Still as it was read: a retry of the upload, since, renewed
			// it (and is appending again); an erasure deleted it.
			tag, err := tx.Exec(ctx, `DELETE FROM document_blob_refs
				WHERE owner_id = $1 AND hash = $2 AND knowledge_id = $3
				AND NOT recorded AND created_at < now() - make_interval(secs => $4)`,
				r.Owner, r.Hash, r.KnowledgeID, olderThan.Seconds())
			if err != nil || tag.RowsAffected() == 0 {
				return err
			}
			refs = tag.RowsAffected()
			// Under the lock no Put of this blob is writing a ref: none
			// left is none coming.
			tag, err = tx.Exec(ctx, `DELETE FROM document_blobs WHERE owner_id = $1 AND hash = $2 AND refs_complete
				AND NOT EXISTS (SELECT 1 FROM document_blob_refs r WHERE r.owner_id = $1 AND r.hash = $2)`, r.Owner, r.Hash)
			blobs = tag.RowsAffected()
			return err
		})
	})
	if err != nil {
		return 0, 0, fmt.Errorf("deleting the ref of knowledge document %d: %w", r.KnowledgeID, err)
	}
	return refs, blobs, nil
}

// within runs op with a context that ends after timeout, or with ctx.
func within(ctx context.Context, timeout time.Duration, op func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return op(ctx)
}
