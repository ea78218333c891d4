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
	// betweenReads, if set, runs between a search's two reads (a test's
	// reindex).
	betweenReads func()
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
	vs, err := k.embedder.Embed(ctx, []string{query})
	if err != nil {
		return nil, derrors.New(derrors.ErrBadGateway, "The embeddings service failed")
	}
	hits, err := k.match(ctx, s, vs[0], minScore)
	if err != nil {
		return nil, err
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

// match is the chunks of the document nearest to the query's vector, with
// their texts. The vectors and the texts are two reads: a reindex that
// commits in between replaces every chunk, and its old ids have no text
// any more. The search then runs again on the new chunks; a hit whose text
// is still missing (another reindex) is left out, never answered empty.
func (k *KnowledgeSearch) match(ctx context.Context, s KnowledgeSettings, query []float32, minScore float64) ([]knowledge.Hit, error) {
	for attempt := 1; ; attempt++ {
		cands, err := k.vectors.candidates(ctx, s.KnowledgeID)
		if err != nil {
			return nil, err
		}
		if k.betweenReads != nil {
			k.betweenReads()
		}
		hits := knowledge.Search(query, cands, s.TopK, minScore)
		ids := make([]int64, len(hits))
		for i, h := range hits {
			ids[i] = h.ID
		}
		texts, err := k.vectors.texts(ctx, ids)
		if err != nil {
			return nil, err
		}
		found := hits[:0]
		for _, h := range hits {
			if text, ok := texts[h.ID]; ok {
				h.Text = text
				found = append(found, h)
			}
		}
		if len(found) == len(hits) || attempt == 2 {
			return found, nil
		}
	}
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
