package commands

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"lectern/aggregates"
	"lectern/events"
	"lectern/eventstore"
	"lectern/personal"
	"lectern/quota"
	"lectern/ratelimit"
)

// SubjectEraser deletes a subject's data key (personal.Keys).
type SubjectEraser interface {
	Erase(ctx context.Context, subject string) error
}

// Erasure erases a user's personal data (GDPR art. 17): what is not in the
// log is deleted, and the user's data key is deleted, so that every personal
// field of their events, on either store, reads as its placeholder; then a
// user.erased event records it, which the read models anonymise the user's
// rows on and downstream systems receive. docs/privacy.md.
type Erasure struct {
	d    Deps
	keys SubjectEraser
}

// NewErasure refuses missing dependencies: it needs d.Keys.
func NewErasure(d Deps) (*Erasure, error) {
	err := d.Validate()
	if d.Keys == nil {
		err = errors.Join(err, errors.New("commands: nil subject keys (no data key)"))
	}
	if err != nil {
		return nil, err
	}
	return &Erasure{d: d, keys: d.Keys}, nil
}

// Erase erases user userID on behalf of actor. Each step can run again: a
// retry after a failure finishes the job, and erasing an erased user
// succeeds without recording anything new.
func (x *Erasure) Erase(ctx context.Context, userID, actor int64) (Result, error) {
	stream := eventstore.StreamName(events.CategoryUser, userID)
	user, _, _, err := load(ctx, x.d, stream, aggregates.EvolveUser)
	if err != nil {
		return Result{}, err
	}
	if _, err := aggregates.DecideErase(user, actor); err != nil {
		return Result{}, err
	}
	if err := x.eraseOutsideTheLog(ctx, user); err != nil {
		return Result{}, fmt.Errorf("erase user %d: %w", userID, err)
	}
	_, res, err := execute(ctx, x.d, stream, aggregates.EvolveUser, func(u aggregates.User) ([]events.Event, error) {
		return aggregates.DecideErase(u, actor)
	})
	return res, err
}

// eraseOutsideTheLog deletes what Lectern holds of u outside the log, and
// u's key; then once more what a request in flight may have written in
// between.
func (x *Erasure) eraseOutsideTheLog(ctx context.Context, u aggregates.User) error {
	if err := x.forget(ctx, u); err != nil {
		return err
	}
	// The key goes after: until then a retry can still read the e-mail
	// address the first pass deletes by.
	if err := x.keys.Erase(ctx, personal.UserSubject(u.ID)); err != nil {
		return err
	}
	// Once more, now that no new data of the user's can be written: a
	// request that passed its checks before the first pass (an upload whose
	// text was being extracted, a reindex waiting on its embedder) may have
	// written since. Writes outside the log of what the key seals wait for
	// the key's erasure or see it (personal.HoldLiveKey). Not what is kept
	// by the address: it is free since the first pass, and what was written
	// by it since is a new sign-up's.
	anyone := u
	anyone.Email = ""
	return x.forget(ctx, anyone)
}

// ErasePartner erases the personal data of a partner without a user
// account (name, e-mail, phone: a subject of its own) on an admin's behalf:
// its key is deleted, then partner.erased records it. Like Erase, each step
// can run again, and erasing an erased partner records nothing new.
func (x *Erasure) ErasePartner(ctx context.Context, partnerID, actor int64) (Result, error) {
	stream := partnerStream(partnerID)
	p, _, _, err := load(ctx, x.d, stream, aggregates.EvolvePartner)
	if err != nil {
		return Result{}, err
	}
	if p.Exists() && p.UserID != nil {
		// Its data was the user's, erased with them: nothing is left to
		// erase (not a 409 asking for the user's erasure, done already).
		u, _, _, err := load(ctx, x.d, eventstore.StreamName(events.CategoryUser, *p.UserID), aggregates.EvolveUser)
		if err != nil {
			return Result{}, err
		}
		if u.Erased {
			return Result{}, nil
		}
	}
	if _, err := aggregates.DecideErasePartner(p, actor); err != nil {
		return Result{}, err
	}
	if err := x.keys.Erase(ctx, personal.PartnerSubject(partnerID)); err != nil {
		return Result{}, err
	}
	if _, err := x.d.DB.Exec(ctx, blankDeadLetters, personal.PartnerSubject(partnerID), personal.ErasedText); err != nil {
		return Result{}, err
	}
	_, res, err := execute(ctx, x.d, stream, aggregates.EvolvePartner, func(p aggregates.Partner) ([]events.Event, error) {
		return aggregates.DecideErasePartner(p, actor)
	})
	return res, err
}

// blankDeadLetters sets the errors of the dead letters of a subject's
// events ($1) to the erased placeholder ($2): recorded without the values
// they quote (pgtext), they may still hold one that some error told
// unquoted. Their ids, type and position stay for the operator.
const blankDeadLetters = `UPDATE projection_dead_letters SET error = $2, updated_at = now()
	WHERE subject = $1 AND error <> $2`

// forget deletes what Lectern holds of the user outside the log, in one
// transaction: the password, sessions (refresh tokens: every access token
// of theirs is refused at once), codes and rate-limit buckets by e-mail
// and those of the user's class joins,
// stored responses of idempotent requests, the e-mail's uniqueness claim
// (the address may sign up again, as a new user), documents' texts and
// chunks, and the errors of the dead letters of their events.
func (x *Erasure) forget(ctx context.Context, u aggregates.User) error {
	type statement struct {
		sql  string
		args []any
	}
	stream := eventstore.StreamName(events.CategoryUser, u.ID)
	statements := []statement{
		{`DELETE FROM credentials WHERE user_id = $1`, []any{u.ID}},
		{`UPDATE refresh_tokens SET revoked_at = now() WHERE user_id = $1 AND revoked_at IS NULL`, []any{u.ID}},
		{`DELETE FROM idempotency_keys WHERE user_id = $1`, []any{u.ID}},
		{`DELETE FROM rate_windows WHERE bucket = $1`, []any{JoinFailBucket(u.ID)}},
		{`DELETE FROM rate_buckets WHERE bucket = $1`, []any{JoinUserBucket(u.ID)}},
		{`DELETE FROM rate_buckets WHERE bucket = $1`, []any{TurnBucket(u.ID)}},
		{`DELETE FROM rate_buckets WHERE bucket = $1`, []any{UploadBucket(u.ID)}},
		{`DELETE FROM rate_buckets WHERE bucket = $1`, []any{PromotionBucket(u.ID)}},
		{`DELETE FROM rate_buckets WHERE bucket = $1`, []any{quota.Bucket(u.ID)}},
		{`DELETE FROM unique_claims WHERE scope = $1 AND owner = $2`, []any{emailScope, stream}},
		// The blobs' refs before the blobs, in the order blobs.Sweep
		// deletes them (no deadlock with a sweep).
		{`DELETE FROM document_blob_refs WHERE owner_id = $1`, []any{u.ID}},
		// The blobs before the chunks: indexing holds a document's blob
		// until its chunks commit (indexer.index), so this waits for
		// chunks being written, which the next statement then sees.
		{`DELETE FROM document_blobs WHERE owner_id = $1`, []any{u.ID}},
		{`DELETE FROM knowledge_chunks WHERE owner_id = $1
			OR knowledge_id IN (SELECT id FROM knowledge_documents WHERE user_id = $1)`, []any{u.ID}},
		{blankDeadLetters, []any{personal.UserSubject(u.ID), personal.ErasedText}},
	}
	// The address itself: readable until the key goes (a retry after that
	// reads the placeholder, and the first attempt already deleted these).
	if u.Email != "" && u.Email != personal.ErasedEmail(personal.UserSubject(u.ID)) {
		statements = append(statements,
			statement{`DELETE FROM email_codes WHERE email = $1`, []any{u.Email}},
			statement{`DELETE FROM rate_windows WHERE ` + ratelimit.KeyedBy, []any{u.Email}},
			// Codes are counted by mailbox, which may be spelt otherwise.
			statement{`DELETE FROM rate_windows WHERE bucket = $1`, []any{SendCodeBucket(u.Email)}},
			statement{`DELETE FROM rate_buckets WHERE ` + ratelimit.KeyedBy, []any{u.Email}})
	}
	return pgx.BeginFunc(ctx, x.d.DB, func(tx pgx.Tx) error {
		for _, s := range statements {
			if _, err := tx.Exec(ctx, s.sql, s.args...); err != nil {
				return err
			}
		}
		return nil
	})
}
