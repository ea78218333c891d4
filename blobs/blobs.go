// Package blobs keeps large content outside the event log: a knowledge
// document's text is stored once per owner, addressed by its SHA-256, and
// events carry the address (Ref) instead of the text. Events stay small
// (EventStoreDB refuses an append over 1 MiB), and the content is sealed
// under its owner's data key (package personal), so that erasing the owner
// makes it unreadable with the rest of their personal data.
//
// A blob is stored before the event that refers to it is appended, and that
// append may fail: each blob keeps a ref of every document it was stored
// for (document_blob_refs), and Sweep deletes the refs of documents that
// were never recorded, and a blob with its last ref.
package blobs

import (
	"context"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"lectern/personal"
)

// Ref is the address of a blob: its owner's content with this hash and size.
type Ref struct {
	Hash string // hex SHA-256 of the content
	Size int64  // bytes
}

// RefOf is the address content has.
func RefOf(content []byte) Ref {
	sum := sha256.Sum256(content)
	return Ref{Hash: hex.EncodeToString(sum[:]), Size: int64(len(content))}
}

// ErrNotFound is a blob that is not stored (never written, or erased).
var ErrNotFound = errors.New("blob not found")

// DB is what the store needs of PostgreSQL: a pool or a transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Store keeps blobs in db, sealed under their owners' keys; with no keys
// (the bench's baseline), in clear.
type Store struct {
	db   DB
	keys personal.KeySource
}

// New returns the blob store of db.
func New(db DB, keys personal.KeySource) *Store { return &Store{db: db, keys: keys} }

func subject(owner int64) string { return "user-" + strconv.FormatInt(owner, 10) }

// Put stores owner's content for the knowledge document knowledgeID, once:
// writing the same content again is a no-op, but for its ref (Sweep). It
// returns the content's address. The blob and its ref are written in one
// transaction, under the blob's lock.
func (s *Store) Put(ctx context.Context, owner, knowledgeID int64, content []byte) (Ref, error) {
	ref := RefOf(content)
	stored := content
	if s.keys != nil {
		aead, err := s.keys.Key(ctx, subject(owner), true)
		if err != nil {
			return Ref{}, fmt.Errorf("blobs: put: %w", err)
		}
		nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(content)+aead.Overhead())
		if _, err := rand.Read(nonce); err != nil {
			return Ref{}, err
		}
		stored = aead.Seal(nonce, nonce, content, []byte(ref.Hash))
	}
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lockBlob, owner, ref.Hash); err != nil {
			return err
		}
		// Sealed with a key this process may have cached past the
		// owner's erasure on another replica: stored only while the key
		// stands (see personal.HoldLiveKey).
		if s.keys != nil {
			if err := personal.HoldLiveKey(ctx, tx, subject(owner)); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO document_blobs (owner_id, hash, size, content, sealed, refs_complete)
			VALUES ($1, $2, $3, $4, $5, true) ON CONFLICT (owner_id, hash) DO NOTHING`,
			owner, ref.Hash, ref.Size, stored, s.keys != nil); err != nil {
			return err
		}
		// A retry of the upload (its Idempotency-Key draws the same id)
		// renews the ref: its append is under way again.
		_, err := tx.Exec(ctx, `INSERT INTO document_blob_refs (owner_id, hash, knowledge_id) VALUES ($1, $2, $3)
			ON CONFLICT (owner_id, hash, knowledge_id) DO UPDATE SET created_at = now()`, owner, ref.Hash, knowledgeID)
		return err
	})
	if err != nil {
		return Ref{}, fmt.Errorf("blobs: put: %w", err)
	}
	return ref, nil
}

// lockBlob takes the advisory lock of the blob ($1 its owner, $2 its hash)
// until the transaction ends: Put holds it while it stores a blob and its
// ref, Sweep while it deletes a ref and perhaps the blob, so that a sweep
// never deletes a blob whose new ref is being written.
const lockBlob = `SELECT pg_advisory_xact_lock(hashtextextended('lectern document blob ' || $1::bigint || ' ' || $2::text, 0))`

// Get returns owner's content at ref, checked against its hash: ErrNotFound
// once the owner was erased.
func (s *Store) Get(ctx context.Context, owner int64, ref Ref) ([]byte, error) {
	var content []byte
	var sealed bool
	err := s.db.QueryRow(ctx, `SELECT content, sealed FROM document_blobs WHERE owner_id = $1 AND hash = $2`, owner, ref.Hash).
		Scan(&content, &sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("blobs: get: %w", err)
	}
	if sealed {
		if content, err = s.open(ctx, owner, ref, content); err != nil {
			return nil, err
		}
	}
	if got := RefOf(content); got != ref {
		return nil, fmt.Errorf("blobs: content of %s has hash %s and %d bytes, want %d", ref.Hash, got.Hash, got.Size, ref.Size)
	}
	return content, nil
}

func (s *Store) open(ctx context.Context, owner int64, ref Ref, sealed []byte) ([]byte, error) {
	if s.keys == nil {
		return nil, errors.New("blobs: a sealed blob, and no data key to open it")
	}
	aead, err := s.keys.Key(ctx, subject(owner), false)
	if errors.Is(err, personal.ErrErased) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("blobs: get: %w", err)
	}
	return openSealed(aead, sealed, ref)
}

func openSealed(aead cipher.AEAD, sealed []byte, ref Ref) ([]byte, error) {
	n := aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("blobs: sealed content too short")
	}
	content, err := aead.Open(nil, sealed[:n], sealed[n:], []byte(ref.Hash))
	if err != nil {
		return nil, fmt.Errorf("blobs: open %s: %w", ref.Hash, err)
	}
	return content, nil
}
