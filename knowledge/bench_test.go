package knowledge_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"lectern/knowledge"
)

// BenchmarkSearch10k: one query against 10 000 offline-embedded chunks
// (cosine, min_score, top_k 5), the in-process part of a search.
func BenchmarkSearch10k(b *testing.B) {
	e := knowledge.NewOffline()
	cands := make([]knowledge.Candidate, 10_000)
	for i := range cands {
		vs, _ := e.Embed(context.Background(), []string{fmt.Sprintf("chunk %d about topic %d and subject %d", i, i%97, i%13)})
		cands[i] = knowledge.Candidate{ID: int64(i + 1), Vector: vs[0]}
	}
	q, _ := e.Embed(context.Background(), []string{"topic 42 subject 3"})
	b.ResetTimer()
	for b.Loop() {
		knowledge.Search(q[0], cands, 5, 0)
	}
}

// BenchmarkIndexOffline: chunking and embedding a 100 000-character text;
// reports chunks/s.
func BenchmarkIndexOffline(b *testing.B) {
	text := strings.Repeat("Cells divide by mitosis; mitochondria make ATP from glucose. ", 1600)
	e := knowledge.NewOffline()
	var n int
	for b.Loop() {
		chunks := knowledge.Chunk(text, knowledge.ChunkSize, knowledge.ChunkOverlap)
		if _, err := e.Embed(context.Background(), chunks); err != nil {
			b.Fatal(err)
		}
		n += len(chunks)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "chunks/s")
}
