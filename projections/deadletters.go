package projections

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/personal"
	"lectern/pgtext"
)

// PoisonPolicy is what a projection does with an event it failed to apply
// MaxAttempts times. Either way the event is recorded in
// projection_dead_letters with its error.
type PoisonPolicy int

const (
	// StopOnPoison stops the projection at the event until an operator
	// retries or skips it (`lectern projections dead-letters`): a read model
	// that silently misses an event is wrong in ways nobody sees.
	StopOnPoison PoisonPolicy = iota
	// SkipPoison passes over the event and goes on.
	SkipPoison
)

// Dead-letter statuses (see migration 00015).
const (
	DeadLetterStopped  = "stopped"
	DeadLetterSkipped  = "skipped"
	DeadLetterRetry    = "retry"
	DeadLetterSkip     = "skip"
	DeadLetterResolved = "resolved"
)

// DeadLetter is an event a projection could not apply.
type DeadLetter struct {
	Projection    string
	EventID       string
	EventType     string
	StreamID      string
	Position      string
	Error         string
	Failures      int
	Status        string
	FirstFailedAt time.Time
	UpdatedAt     time.Time
	// ResolvedBy names the operator who asked for the last retry or skip
	// (ResolveDeadLetter's actor); "" when none did.
	ResolvedBy string
}

// execer is a pool or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// recordDeadLetter records msg's failure (failures more of them) under status:
// its error without the values it quotes, and the subject whose personal
// data the event holds, whose erasure blanks the error (commands.Erasure).
// It holds the subject's key row while it writes (personal.HoldLiveKey): an
// erasure either waits for it and then blanks it, or came first, and the
// error is written blank.
func recordDeadLetter(ctx context.Context, db execer, projection string, msg *message.Message, failure error, failures int, status string) error {
	var meta eventstore.Metadata
	_ = postgres.DecodeMetadata(msg, &meta) // no actor: the event's members may still name its subject
	subject := personal.SubjectOf(msg.Metadata.Get(postgres.MetaEventType), msg.Payload, meta.UserID)
	text := pgtext.Valueless(failure).Error()
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if subject != "" {
			switch err := personal.HoldLiveKey(ctx, tx, subject); {
			case errors.Is(err, personal.ErrSubjectErased):
				text = personal.ErasedText
			case err != nil:
				return err
			}
		}
		_, err := tx.Exec(ctx, `
			INSERT INTO projection_dead_letters (projection, event_id, event_type, stream_id, position, error, failures, status, subject)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, NULLIF($9, ''))
			ON CONFLICT (projection, event_id) DO UPDATE SET error = excluded.error,
				failures = projection_dead_letters.failures + excluded.failures, status = excluded.status, updated_at = now(),
				subject = coalesce(excluded.subject, projection_dead_letters.subject)`,
			projection, msg.UUID, msg.Metadata.Get(postgres.MetaEventType), msg.Metadata.Get(postgres.MetaStreamID),
			msg.Metadata.Get(postgres.MetaPosition), text, failures, status, subject)
		return err
	})
	if err != nil {
		return fmt.Errorf("record dead letter %s of %s: %w", msg.UUID, projection, err)
	}
	return nil
}

// deadLetterStatus is the status of projection's dead letter eventID; ""
// when there is none.
func deadLetterStatus(ctx context.Context, db execer, projection, eventID string) (string, error) {
	var status string
	err := db.QueryRow(ctx, `SELECT status FROM projection_dead_letters WHERE projection = $1 AND event_id = $2`,
		projection, eventID).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return status, err
}

// ListDeadLetters returns the dead letters, newest first: only those that
// want an operator (stopped, retry, skip) unless all.
func ListDeadLetters(ctx context.Context, db *pgxpool.Pool, all bool) ([]DeadLetter, error) {
	rows, err := db.Query(ctx, `
		SELECT projection, event_id::text, event_type, stream_id, position, error, failures, status, first_failed_at, updated_at,
			coalesce(resolved_by, '')
		FROM projection_dead_letters WHERE $1 OR status IN ('stopped', 'retry', 'skip')
		ORDER BY updated_at DESC, projection, event_id`, all)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (DeadLetter, error) {
		var d DeadLetter
		err := row.Scan(&d.Projection, &d.EventID, &d.EventType, &d.StreamID, &d.Position, &d.Error, &d.Failures, &d.Status,
			&d.FirstFailedAt, &d.UpdatedAt, &d.ResolvedBy)
		return d, err
	})
}

// ErrErasureNotSkipped: an erasure cannot be passed over (see erasure).
var ErrErasureNotSkipped = errors.New("an erasure cannot be passed over, or the read model would keep the person's data: fix what makes it fail, then retry it")

// ErrNotStopped: the dead letter does not exist or no projection is stopped on it.
var ErrNotStopped = errors.New("no projection is stopped on that event")

// ResolveDeadLetter asks the projection stopped on eventID to try it again
// (DeadLetterRetry) or to pass over it (DeadLetterSkip); the runner serving
// the projection restarts it within its OperatorPoll. actor names who asked
// (recorded as the dead letter's ResolvedBy); it must not be empty.
func ResolveDeadLetter(ctx context.Context, db *pgxpool.Pool, projection, eventID, action, actor string) error {
	if action != DeadLetterRetry && action != DeadLetterSkip {
		return fmt.Errorf("dead letter action %q: want %s or %s", action, DeadLetterRetry, DeadLetterSkip)
	}
	if actor == "" {
		return errors.New("dead letter: who resolves it must be named")
	}
	if action == DeadLetterSkip {
		var typ string
		err := db.QueryRow(ctx, `SELECT event_type FROM projection_dead_letters WHERE projection = $1 AND event_id::text = $2`,
			projection, eventID).Scan(&typ)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if erasure(typ) {
			return fmt.Errorf("%s %s is a %s: %w", projection, eventID, typ, ErrErasureNotSkipped)
		}
	}
	tag, err := db.Exec(ctx, `UPDATE projection_dead_letters SET status = $3, resolved_by = $4, updated_at = now()
		WHERE projection = $1 AND event_id::text = $2 AND status IN ('stopped', 'retry', 'skip')`, projection, eventID, action, actor)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s %s: %w", projection, eventID, ErrNotStopped)
	}
	return nil
}
