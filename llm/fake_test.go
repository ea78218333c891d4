package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// reply is one scripted answer of the fake provider.
type reply struct {
	status int               // default 200
	header map[string]string // extra response headers
	body   string            // raw body; empty: a completion answering text
	text   string            // answer of the default body
	delay  time.Duration     // wait before answering (ends early when the client gives up)
	// meet, if set, holds the answer until every request meeting there has
	// arrived (or its deadline passes: then 503).
	meet *rendezvous
}

// rendezvous is where n requests, to any fake providers, wait for each other.
type rendezvous struct {
	mu      sync.Mutex
	n       int
	all     chan struct{}
	timeout time.Duration
}

func newRendezvous(n int, timeout time.Duration) *rendezvous {
	return &rendezvous{n: n, all: make(chan struct{}), timeout: timeout}
}

// arrive counts a request in, and reports whether all arrived before the
// deadline or ctx's end.
func (r *rendezvous) arrive(ctx context.Context) bool {
	r.mu.Lock()
	if r.n--; r.n == 0 {
		close(r.all)
	}
	r.mu.Unlock()
	select {
	case <-r.all:
		return true
	case <-ctx.Done():
		return false
	case <-time.After(r.timeout):
		return false
	}
}

// received is one request the fake provider got.
type received struct {
	Method, Path string
	Header       http.Header
	Body         map[string]any
	At           time.Time
}

// fakeProvider is an OpenAI-compatible chat completions server answering with
// scripted replies in order (the last one repeats) and recording every request.
type fakeProvider struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	replies []reply
	reqs    []received
}

func newFakeProvider(t *testing.T, replies ...reply) *fakeProvider {
	t.Helper()
	if len(replies) == 0 {
		replies = []reply{{text: "fake answer"}}
	}
	f := &fakeProvider{t: t, replies: replies}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// URL is the base_url of the fake (an OpenAI-style /v1 root).
func (f *fakeProvider) URL() string { return f.srv.URL + "/v1" }

func (f *fakeProvider) requests() []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]received(nil), f.reqs...)
}

func (f *fakeProvider) serve(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(data, &body); err != nil {
		f.t.Errorf("fake provider: request body is not JSON: %v: %s", err, data)
	}
	f.mu.Lock()
	n := len(f.reqs)
	f.reqs = append(f.reqs, received{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, At: time.Now()})
	rep := f.replies[min(n, len(f.replies)-1)]
	f.mu.Unlock()

	if rep.meet != nil && !rep.meet.arrive(r.Context()) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, errorJSON("the other requests never arrived"))
		return
	}
	if rep.delay > 0 {
		// The fault under test (a slow provider), not a wait for something.
		select {
		case <-time.After(rep.delay):
		case <-r.Context().Done():
			return
		}
	}
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	status := rep.status
	if status == 0 {
		status = http.StatusOK
	}
	b := rep.body
	if b == "" {
		b = completionJSON(rep.text)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, b)
}

func completionJSON(text string) string {
	answer, _ := json.Marshal(text)
	return fmt.Sprintf(`{
  "id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "test-model",
  "choices": [{"index": 0, "finish_reason": "stop",
               "message": {"role": "assistant", "content": %s, "refusal": null}}],
  "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
}`, answer)
}

func errorJSON(message string) string {
	return fmt.Sprintf(`{"error": {"message": %q, "type": "invalid_request_error", "param": null, "code": null}}`, message)
}

// fakeClock is the real clock, except that Sleep returns at once and moves Now forward.
type fakeClock struct {
	mu     sync.Mutex
	offset time.Duration
	sleeps []time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
	c.sleeps = append(c.sleeps, d)
	return nil
}

func (c *fakeClock) slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// fakeModel is an OpenAI-compatible model served by f.
func fakeModel(id int64, name string, f *fakeProvider) Model {
	return Model{
		ID: id, Name: name, Provider: ProviderOpenAI, BaseURL: f.URL(), ProviderModel: "test-model",
		APIKeyEnv: "TEST_KEY", Timeout: 2 * time.Second, Retries: 2,
	}
}

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}
