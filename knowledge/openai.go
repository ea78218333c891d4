package knowledge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Environment variables that select an OpenAI-compatible embeddings endpoint
// instead of the offline embedder.
const (
	EnvEmbeddingsURL       = "LECTERN_EMBEDDINGS_URL"         // base URL (".../v1") or the full ".../embeddings" URL
	EnvEmbeddingsModel     = "LECTERN_EMBEDDINGS_MODEL"       // e.g. text-embedding-3-small
	EnvEmbeddingsAPIKeyEnv = "LECTERN_EMBEDDINGS_API_KEY_ENV" // the name of the variable holding the key
)

// FromEnv returns the embedder the environment configures: the
// OpenAI-compatible client when LECTERN_EMBEDDINGS_URL is set (a model is then
// required), else the offline embedder. getenv is os.Getenv in production.
func FromEnv(getenv func(string) string) (Embedder, error) {
	url := strings.TrimSpace(getenv(EnvEmbeddingsURL))
	if url == "" {
		return NewOffline(), nil
	}
	model := strings.TrimSpace(getenv(EnvEmbeddingsModel))
	if model == "" {
		return nil, fmt.Errorf("%s is set but %s is not", EnvEmbeddingsURL, EnvEmbeddingsModel)
	}
	var key string
	if name := strings.TrimSpace(getenv(EnvEmbeddingsAPIKeyEnv)); name != "" {
		if key = getenv(name); key == "" {
			return nil, fmt.Errorf("%s names %s, which is not set", EnvEmbeddingsAPIKeyEnv, name)
		}
	}
	return &Remote{URL: url, Model: model, APIKey: key}, nil
}

// Remote calls an OpenAI-compatible POST /embeddings endpoint.
type Remote struct {
	URL    string
	Model  string
	APIKey string       // sent as a bearer token when set
	Client *http.Client // nil: a client with a 60 s timeout
	// Batch is how many texts go in one request (0: 64).
	Batch int
}

// Embed implements Embedder.
func (r *Remote) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	batch := r.Batch
	if batch <= 0 {
		batch = 64
	}
	out := make([][]float32, 0, len(texts))
	for len(texts) > 0 {
		n := min(batch, len(texts))
		vs, err := r.embed(ctx, texts[:n])
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
		texts = texts[n:]
	}
	return out, nil
}

func (r *Remote) endpoint() string {
	u := strings.TrimRight(r.URL, "/")
	if strings.HasSuffix(u, "/embeddings") {
		return u
	}
	return u + "/embeddings"
}

func (r *Remote) embed(ctx context.Context, texts []string) ([][]float32, error) {
	body, err := json.Marshal(map[string]any{"model": r.Model, "input": texts})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.endpoint(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if r.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+r.APIKey)
	}
	client := r.Client
	if client == nil {
		client = &http.Client{Timeout: 60 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("embeddings: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("embeddings: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &StatusError{Status: resp.StatusCode, Answer: string(raw)}
	}
	var parsed struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &parsed); err != nil {
		return nil, fmt.Errorf("embeddings: %w", err)
	}
	if len(parsed.Data) != len(texts) {
		return nil, fmt.Errorf("embeddings: %d vectors for %d texts", len(parsed.Data), len(texts))
	}
	out := make([][]float32, len(texts))
	for _, d := range parsed.Data {
		if d.Index < 0 || d.Index >= len(texts) || out[d.Index] != nil {
			return nil, fmt.Errorf("embeddings: bad index %d", d.Index)
		}
		if len(d.Embedding) == 0 {
			return nil, errors.New("embeddings: an empty vector")
		}
		out[d.Index] = d.Embedding
	}
	return out, nil
}

// StatusError is an embeddings endpoint's refusal: its status and its
// answer, which may quote the texts it was given (what is kept of an
// error, in a log or an event, takes the status alone).
type StatusError struct {
	Status int
	Answer string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("embeddings: status %d: %.200s", e.Status, e.Answer)
}
