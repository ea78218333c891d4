package knowledge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"lectern/knowledge"
	"lectern/knowledge/knowledgetest"
)

func TestChunk(t *testing.T) {
	for _, tc := range []struct {
		name          string
		text          string
		size, overlap int
		want          []string
	}{
		{"blank", " \n\t ", 10, 2, nil},
		{"one chunk", "a  b\nc", 10, 2, []string{"a b c"}},
		{"overlap at word boundaries", "aa bb cc dd ee ff", 8, 3, []string{"aa bb cc", "cc dd ee", "ee ff"}},
		{"no overlap", "aa bb cc dd ee", 5, 0, []string{"aa bb", "cc dd", "ee"}},
		{"a long word is cut", "abcdefghij k", 4, 0, []string{"abcd", "efgh", "ij k"}},
		{"overlap never stalls", "aaaa bbbb cccc", 4, 3, []string{"aaaa", "bbbb", "cccc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := knowledge.Chunk(tc.text, tc.size, tc.overlap)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Chunk(%q, %d, %d) (-want +got):\n%s", tc.text, tc.size, tc.overlap, diff)
			}
		})
	}
}

func TestChunkDefaults(t *testing.T) {
	var b strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&b, "wörd%d ", i)
	}
	chunks := knowledge.Chunk(b.String(), knowledge.ChunkSize, knowledge.ChunkOverlap)
	if len(chunks) < 2 {
		t.Fatalf("%d chunks", len(chunks))
	}
	for i, c := range chunks {
		if n := utf8.RuneCountInString(c); n > knowledge.ChunkSize {
			t.Errorf("chunk %d has %d characters", i, n)
		}
		if i > 0 {
			prev := strings.Fields(chunks[i-1])
			first := strings.Fields(c)[0]
			if !strings.Contains(strings.Join(prev[len(prev)-15:], " "), first) {
				t.Errorf("chunk %d does not start inside the end of chunk %d", i, i-1)
			}
		}
	}
	if !strings.HasSuffix(chunks[len(chunks)-1], "wörd1999") {
		t.Errorf("the last chunk does not end the text: %q", chunks[len(chunks)-1])
	}
}

func TestOfflineEmbedder(t *testing.T) {
	e := knowledge.NewOffline()
	vs, err := e.Embed(context.Background(), []string{"Photosynthesis makes SUGAR", "photosynthesis, makes sugar!", "", "tides and the moon"})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vs {
		if len(v) != knowledge.OfflineDims {
			t.Fatalf("vector %d has %d dims", i, len(v))
		}
	}
	var norm float64
	for _, x := range vs[0] {
		norm += float64(x) * float64(x)
	}
	if math.Abs(norm-1) > 1e-6 {
		t.Errorf("|v|² = %v, want 1", norm)
	}
	if s := knowledge.Cosine(vs[0], vs[1]); math.Abs(s-1) > 1e-6 {
		t.Errorf("case and punctuation change the vector: cosine %v", s)
	}
	if s := knowledge.Cosine(vs[0], vs[2]); s != 0 {
		t.Errorf("cosine with an empty text is %v, want 0", s)
	}
	if s := knowledge.Cosine(vs[0], vs[3]); s > 0.5 {
		t.Errorf("unrelated texts have cosine %v", s)
	}
	again, _ := e.Embed(context.Background(), []string{"Photosynthesis makes SUGAR"})
	if diff := cmp.Diff(vs[0], again[0]); diff != "" {
		t.Errorf("not deterministic:\n%s", diff)
	}
}

func TestSearch(t *testing.T) {
	cands := []knowledge.Candidate{
		{ID: 1, Text: "x", Vector: []float32{1, 0}},
		{ID: 2, Text: "y", Vector: []float32{0, 1}},
		{ID: 3, Text: "xy", Vector: []float32{1, 1}},
		{ID: 4, Text: "x again", Vector: []float32{2, 0}},
		{ID: 5, Text: "other dims", Vector: []float32{1, 0, 0}},
	}
	ids := func(hs []knowledge.Hit) []int64 {
		var out []int64
		for _, h := range hs {
			out = append(out, h.ID)
		}
		return out
	}
	q := []float32{1, 0}
	// 2 (orthogonal) and 5 (another embedder's length) share nothing with q.
	if diff := cmp.Diff([]int64{1, 4, 3}, ids(knowledge.Search(q, cands, 10, 0))); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int64{1, 4}, ids(knowledge.Search(q, cands, 2, 0))); diff != "" {
		t.Errorf("top_k 2 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int64{1, 4, 3}, ids(knowledge.Search(q, cands, 10, 0.7))); diff != "" {
		t.Errorf("min_score 0.7 (-want +got):\n%s", diff)
	}
	if got := knowledge.Search(q, cands, 10, 1.0000001); len(got) != 0 {
		t.Errorf("min_score above 1 kept %v", got)
	}
	hits := knowledge.Search(q, cands, 3, 0)
	if math.Abs(hits[2].Score-1/math.Sqrt2) > 1e-9 {
		t.Errorf("score of xy is %v", hits[2].Score)
	}
}

func TestRerank(t *testing.T) {
	hits := []knowledge.Hit{
		{ID: 1, Text: "the cat sat on the mat", Score: 0.9},
		{ID: 2, Text: "chlorophyll absorbs light in photosynthesis", Score: 0.8},
		{ID: 3, Text: "photosynthesis", Score: 0.7},
		{ID: 4, Text: "dogs bark", Score: 0.6},
	}
	got := knowledge.Rerank("What is photosynthesis?", hits, 3)
	var ids []int64
	for _, h := range got {
		ids = append(ids, h.ID)
	}
	// The short passage of only the term first, then the longer one, then
	// the others in their earlier order; three kept.
	if diff := cmp.Diff([]int64{3, 2, 1}, ids); diff != "" {
		t.Errorf("rerank (-want +got):\n%s", diff)
	}
	if got[0].Score != 0.7 {
		t.Errorf("the reranker changed the score: %v", got[0].Score)
	}
	if len(knowledge.Rerank("x", nil, 3)) != 0 {
		t.Error("reranking nothing returned something")
	}
}

func TestRemoteEmbedder(t *testing.T) {
	var calls int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if r.URL.Path != "/v1/embeddings" || r.Header.Get("Authorization") != "Bearer sk-test" {
			http.Error(w, "bad request "+r.URL.Path, http.StatusBadRequest)
			return
		}
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model != "embed-1" {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		type item struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		var data []item
		for i := len(req.Input) - 1; i >= 0; i-- { // out of order on purpose
			data = append(data, item{Index: i, Embedding: []float32{float32(len(req.Input[i])), 1}})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"data": data})
	}))
	defer srv.Close()

	env := map[string]string{
		knowledge.EnvEmbeddingsURL: srv.URL + "/v1", knowledge.EnvEmbeddingsModel: "embed-1",
		knowledge.EnvEmbeddingsAPIKeyEnv: "MY_KEY", "MY_KEY": "sk-test",
	}
	e, err := knowledge.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	r := e.(*knowledge.Remote)
	r.Batch = 2
	vs, err := r.Embed(context.Background(), []string{"a", "bb", "ccc"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]float32{{1, 1}, {2, 1}, {3, 1}}, vs); diff != "" {
		t.Errorf("vectors (-want +got):\n%s", diff)
	}
	if calls != 2 {
		t.Errorf("%d requests, want 2 batches", calls)
	}

	env["MY_KEY"] = "wrong"
	e, _ = knowledge.FromEnv(func(k string) string { return env[k] })
	if _, err := e.Embed(context.Background(), []string{"a"}); err == nil || !strings.Contains(err.Error(), "status 400") {
		t.Errorf("a refused request: %v", err)
	}

	if e, err := knowledge.FromEnv(func(string) string { return "" }); err != nil {
		t.Error(err)
	} else if _, ok := e.(knowledge.Offline); !ok {
		t.Errorf("no configuration gives %T, want the offline embedder", e)
	}
	if _, err := knowledge.FromEnv(func(k string) string {
		return map[string]string{knowledge.EnvEmbeddingsURL: "http://x"}[k]
	}); err == nil {
		t.Error("a URL without a model is accepted")
	}
}

func TestPDFText(t *testing.T) {
	text, err := knowledge.PDFText(context.Background(), knowledgetest.TinyPDF("Mitochondria are the powerhouse of the cell"), knowledge.ExtractLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "Mitochondria are the powerhouse of the cell") {
		t.Errorf("PDF text %q", text)
	}
	if _, err := knowledge.PDFText(context.Background(), []byte("not a pdf"), knowledge.ExtractLimits{}); err == nil {
		t.Error("garbage is read as a PDF")
	}
}
