package knowledge

import (
	"math"
	"slices"
)

// Candidate is a stored chunk with its vector.
type Candidate struct {
	ID     int64
	Text   string
	Vector []float32
}

// Hit is a chunk that matched a query, with its cosine similarity.
type Hit struct {
	ID    int64
	Text  string
	Score float64
}

// Cosine is the cosine similarity of a and b; 0 when either is zero or their
// lengths differ (vectors of another embedder).
func Cosine(a, b []float32) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return 0
	}
	var dot, na, nb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		dot += x * y
		na += x * x
		nb += y * y
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

// Search returns the topK candidates most similar to query whose similarity
// is at least minScore, best first (ties: lower id first). A candidate with
// nothing in common with the query (similarity 0 or less) is never a hit,
// whatever minScore says: a prompt must not be grounded in unrelated text.
func Search(query []float32, cands []Candidate, topK int, minScore float64) []Hit {
	hits := make([]Hit, 0, min(len(cands), max(topK, 0)+1))
	for _, c := range cands {
		s := Cosine(query, c.Vector)
		if s <= 0 || s < minScore {
			continue
		}
		hits = append(hits, Hit{ID: c.ID, Text: c.Text, Score: s})
	}
	slices.SortStableFunc(hits, func(a, b Hit) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	if topK >= 0 && len(hits) > topK {
		hits = hits[:topK]
	}
	return hits
}

// Rerank reorders hits by the lexical relevance of their text to query
// (BM25 over the hits as the corpus; k1 1.2, b 0.75), ties kept in their
// earlier order, and keeps the first topN. Scores are left as they were.
func Rerank(query string, hits []Hit, topN int) []Hit {
	terms := Tokens(query)
	docs := make([][]string, len(hits))
	var total int
	df := map[string]int{}
	for i, h := range hits {
		docs[i] = Tokens(h.Text)
		total += len(docs[i])
		seen := map[string]bool{}
		for _, t := range docs[i] {
			if !seen[t] {
				seen[t] = true
				df[t]++
			}
		}
	}
	avg := 1.0
	if len(hits) > 0 && total > 0 {
		avg = float64(total) / float64(len(hits))
	}
	const k1, b = 1.2, 0.75
	n := float64(len(hits))
	scores := make([]float64, len(hits))
	for i, doc := range docs {
		tf := map[string]int{}
		for _, t := range doc {
			tf[t]++
		}
		for _, q := range terms {
			f := float64(tf[q])
			if f == 0 {
				continue
			}
			idf := math.Log(1 + (n-float64(df[q])+0.5)/(float64(df[q])+0.5))
			scores[i] += idf * f * (k1 + 1) / (f + k1*(1-b+b*float64(len(doc))/avg))
		}
	}
	order := make([]int, len(hits))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(x, y int) int {
		switch {
		case scores[x] > scores[y]:
			return -1
		case scores[x] < scores[y]:
			return 1
		}
		return 0
	})
	out := make([]Hit, 0, len(hits))
	for _, i := range order {
		out = append(out, hits[i])
	}
	if topN >= 0 && len(out) > topN {
		out = out[:topN]
	}
	return out
}
