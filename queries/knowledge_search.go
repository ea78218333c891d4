package queries

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"lectern/derrors"
	"lectern/knowledge"
)

// KnowledgeSearch searches the chunks of knowledge documents: the search
// endpoint, and the passages that ground a practice turn. It reads the
// documents' settings and chunks, and embeds the query.
type KnowledgeSearch struct {
	reads    *DB
	embedder knowledge.Embedder
	vectors  *vectorCache
}

// NewKnowledgeSearch refuses missing dependencies.
func NewKnowledgeSearch(reads *DB, embedder knowledge.Embedder) (*KnowledgeSearch, error) {
	var err error
	if reads == nil {
		err = errors.Join(err, errors.New("queries: nil read models"))
	}
	if embedder == nil {
		err = errors.Join(err, errors.New("queries: nil embedder"))
	}
	if err != nil {
		return nil, err
	}
	return &KnowledgeSearch{reads: reads, embedder: embedder, vectors: newVectorCache(reads.pool)}, nil
}

// SearchHit is a chunk that matched a search, in result order.
type SearchHit struct {
	KnowledgeID int64
	ChunkID     int64
	Text        string
	Score       float64
	Rank        int // 1-based
}

// Search finds the chunks of the caller's document that match query, with
// the document's search settings: cosine similarity, min_score, top_k, then
// the lexical reranker keeping reranker_top_n when it is enabled.
func (k *KnowledgeSearch) Search(ctx context.Context, caller, knowledgeID int64, query string) ([]SearchHit, error) {
	settings, err := k.reads.KnowledgeSettings(ctx, caller, knowledgeID)
	if err != nil {
		return nil, err
	}
	return k.search(ctx, settings, query)
}

func (k *KnowledgeSearch) search(ctx context.Context, s KnowledgeSettings, query string) ([]SearchHit, error) {
	minScore, err := strconv.ParseFloat(s.MinScore, 64)
	if err != nil {
		return nil, fmt.Errorf("knowledge %d min_score %q: %w", s.KnowledgeID, s.MinScore, err)
	}
	cands, err := k.vectors.candidates(ctx, s.KnowledgeID)
	if err != nil {
		return nil, err
	}
	vs, err := k.embedder.Embed(ctx, []string{query})
	if err != nil {
		return nil, derrors.New(derrors.ErrBadGateway, "The embeddings service failed")
	}
	hits := knowledge.Search(vs[0], cands, s.TopK, minScore)
	ids := make([]int64, len(hits))
	for i, h := range hits {
		ids[i] = h.ID
	}
	texts, err := k.vectors.texts(ctx, ids)
	if err != nil {
		return nil, err
	}
	for i := range hits {
		hits[i].Text = texts[hits[i].ID]
	}
	if s.RerankerEnabled {
		hits = knowledge.Rerank(query, hits, s.RerankerTopN)
	}
	out := make([]SearchHit, len(hits))
	for i, h := range hits {
		out[i] = SearchHit{KnowledgeID: s.KnowledgeID, ChunkID: h.ID, Text: h.Text, Score: h.Score, Rank: i + 1}
	}
	return out, nil
}

// Passages searches each of the caller's documents ids (in order) for query
// with its own settings; ranks run across them all.
func (k *KnowledgeSearch) Passages(ctx context.Context, caller int64, ids []int64, query string) ([]SearchHit, error) {
	var out []SearchHit
	for _, id := range ids {
		hits, err := k.Search(ctx, caller, id, query)
		if err != nil {
			return nil, err
		}
		for _, h := range hits {
			h.Rank = len(out) + 1
			out = append(out, h)
		}
	}
	return out, nil
}
