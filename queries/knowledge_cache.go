package queries

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/knowledge"
)

// maxCachedChunks bounds the vectors kept in memory (about 1 KiB each with
// the offline embedder's 256 dimensions).
const maxCachedChunks = 50_000

// vectorCache keeps documents' vectors in memory: reading 10 000 vectors
// from PostgreSQL costs far more than scoring them. Indexing replaces a
// document's chunks with new ids in one transaction, so the id of its first
// chunk names the index generation; one primary-key lookup tells whether the
// cached copy is current.
type vectorCache struct {
	db *pgxpool.Pool

	mu     sync.Mutex
	docs   map[int64]cachedIndex
	order  []int64 // insertion order, oldest first, for eviction
	chunks int
}

type cachedIndex struct {
	generation int64
	cands      []knowledge.Candidate // vectors only; texts are read for the hits
}

func newVectorCache(db *pgxpool.Pool) *vectorCache {
	return &vectorCache{db: db, docs: map[int64]cachedIndex{}}
}

// candidates returns the document's vectors (without texts).
func (c *vectorCache) candidates(ctx context.Context, id int64) ([]knowledge.Candidate, error) {
	var generation int64
	err := c.db.QueryRow(ctx, `SELECT id FROM knowledge_chunks WHERE knowledge_id = $1 AND ord = 0`, id).Scan(&generation)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	cached, ok := c.docs[id]
	c.mu.Unlock()
	if ok && cached.generation == generation {
		return cached.cands, nil
	}
	rows, err := c.db.Query(ctx, `SELECT id, embedding FROM knowledge_chunks WHERE knowledge_id = $1 ORDER BY ord`, id)
	if err != nil {
		return nil, err
	}
	cands, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (knowledge.Candidate, error) {
		var cand knowledge.Candidate
		err := row.Scan(&cand.ID, &cand.Vector)
		return cand, err
	})
	if err != nil {
		return nil, err
	}
	// Only a consistent read is kept: the first chunk must still be the one
	// that named the generation.
	if len(cands) > 0 && cands[0].ID == generation && len(cands) <= maxCachedChunks {
		c.put(id, cachedIndex{generation: generation, cands: cands})
	}
	return cands, nil
}

func (c *vectorCache) put(id int64, idx cachedIndex) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.docs[id]; ok {
		c.chunks -= len(old.cands)
	} else {
		c.order = append(c.order, id)
	}
	c.docs[id] = idx
	c.chunks += len(idx.cands)
	for c.chunks > maxCachedChunks && len(c.order) > 0 {
		oldest := c.order[0]
		c.order = c.order[1:]
		c.chunks -= len(c.docs[oldest].cands)
		delete(c.docs, oldest)
	}
}

// texts reads the texts of the given chunks.
func (c *vectorCache) texts(ctx context.Context, ids []int64) (map[int64]string, error) {
	rows, err := c.db.Query(ctx, `SELECT id, text FROM knowledge_chunks WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[int64]string, len(ids))
	for rows.Next() {
		var id int64
		var text string
		if err := rows.Scan(&id, &text); err != nil {
			return nil, err
		}
		out[id] = text
	}
	return out, rows.Err()
}
