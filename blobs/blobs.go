// Package blobs keeps large content outside the event log: a knowledge
// document's text is stored once per owner, addressed by its SHA-256, and
// events carry the address (Ref) instead of the text. Events stay small
// (EventStoreDB refuses an append over 1 MiB), and the content is sealed
// under its owner's data key (package personal), so that erasing the owner
// makes it unreadable with the rest of their personal data.
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
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
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

// Put stores owner's content, once: writing the same content again is a
// no-op. It returns the content's address.
func (s *Store) Put(ctx context.Context, owner int64, content []byte) (Ref, error) {
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
	if _, err := s.db.Exec(ctx, `INSERT INTO document_blobs (owner_id, hash, size, content, sealed) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (owner_id, hash) DO NOTHING`, owner, ref.Hash, ref.Size, stored, s.keys != nil); err != nil {
		return Ref{}, fmt.Errorf("blobs: put: %w", err)
	}
	return ref, nil
}

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
