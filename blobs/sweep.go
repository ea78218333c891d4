package blobs

import (
	"context"
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
	// SweepLimit bounds the refs one Sweep looks at: each costs a read of
	// the event store.
	SweepLimit = 1000
)

// Recorded reports whether the knowledge document knowledgeID is recorded:
// whether its upload's append succeeded.
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

// Swept is what a Sweep deleted.
type Swept struct {
	Refs  int64 // rows of document_blob_refs
	Blobs int64 // rows of document_blobs
}

// Sweep looks at up to limit refs older than olderThan (RefGrace) that it
// has not yet found recorded, oldest first. A ref whose document is
// recorded is marked so, for good (it keeps its blob until the owner's
// erasure, and is not looked at again); one whose document is not was
// left by an upload whose append failed: Sweep deletes it, and the blob
// with it when no ref of the blob is left. A blob stored before refs were
// (refs_complete false) is never deleted. Each ref is deleted in a
// transaction of its own, under its blob's lock (lockBlob).
//
// It stops at the first error, returning what it deleted until then; the
// next Sweep takes up where it stopped.
func Sweep(ctx context.Context, db DB, recorded Recorded, olderThan time.Duration, limit int) (Swept, error) {
	var swept Swept
	rows, err := db.Query(ctx, `SELECT owner_id, hash, knowledge_id FROM document_blob_refs
		WHERE NOT recorded AND created_at < now() - make_interval(secs => $1)
		ORDER BY created_at LIMIT $2`, olderThan.Seconds(), limit)
	if err != nil {
		return swept, fmt.Errorf("blobs: sweep: %w", err)
	}
	type ref struct {
		Owner       int64
		Hash        string
		KnowledgeID int64
	}
	refs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ref])
	if err != nil {
		return swept, fmt.Errorf("blobs: sweep: %w", err)
	}
	for _, r := range refs {
		ok, err := recorded(ctx, r.KnowledgeID)
		if err != nil {
			return swept, fmt.Errorf("blobs: sweep: %w", err)
		}
		if ok {
			if _, err := db.Exec(ctx, `UPDATE document_blob_refs SET recorded = true
				WHERE owner_id = $1 AND hash = $2 AND knowledge_id = $3`, r.Owner, r.Hash, r.KnowledgeID); err != nil {
				return swept, fmt.Errorf("blobs: sweep: %w", err)
			}
			continue
		}
		var refsDeleted, blobsDeleted int64
		err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
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
			refsDeleted = tag.RowsAffected()
			// Under the lock no Put of this blob is writing a ref: none
			// left is none coming.
			tag, err = tx.Exec(ctx, `DELETE FROM document_blobs WHERE owner_id = $1 AND hash = $2 AND refs_complete
				AND NOT EXISTS (SELECT 1 FROM document_blob_refs r WHERE r.owner_id = $1 AND r.hash = $2)`, r.Owner, r.Hash)
			blobsDeleted = tag.RowsAffected()
			return err
		})
		if err != nil {
			return swept, fmt.Errorf("blobs: sweep: %w", err)
		}
		swept.Refs += refsDeleted
		swept.Blobs += blobsDeleted
	}
	return swept, nil
}
