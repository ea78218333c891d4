// Package blobs keeps large content outside the event log: a knowledge
// document's text is stored once per owner, addressed by its SHA-256, and
// events carry the address (Ref) instead of the text. Events stay small
// (EventStoreDB refuses an append over 1 MiB) and the content can be erased
// without rewriting history.
package blobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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

// Put stores owner's content, once: writing the same content again is a
// no-op. It returns the content's address.
func Put(ctx context.Context, db DB, owner int64, content []byte) (Ref, error) {
	ref := RefOf(content)
	if _, err := db.Exec(ctx, `INSERT INTO document_blobs (owner_id, hash, size, content) VALUES ($1, $2, $3, $4)
		ON CONFLICT (owner_id, hash) DO NOTHING`, owner, ref.Hash, ref.Size, content); err != nil {
		return Ref{}, fmt.Errorf("blobs: put: %w", err)
	}
	return ref, nil
}

// Get returns owner's content at ref, checked against its hash.
func Get(ctx context.Context, db DB, owner int64, ref Ref) ([]byte, error) {
	var content []byte
	err := db.QueryRow(ctx, `SELECT content FROM document_blobs WHERE owner_id = $1 AND hash = $2`, owner, ref.Hash).Scan(&content)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("blobs: get: %w", err)
	}
	if got := RefOf(content); got != ref {
		return nil, fmt.Errorf("blobs: content of %s has hash %s and %d bytes, want %d", ref.Hash, got.Hash, got.Size, ref.Size)
	}
	return content, nil
}
