package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestWords(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"Hello", []string{"Hello"}},
		{"Hello there", []string{"Hello", " there"}},
		{"  two  spaces\tand a tab  ", []string{"  two", "  spaces", "\tand", " a", " tab  "}},
		{"   ", []string{"   "}},
		{"héllo 世界 🙂", []string{"héllo", " 世界", " 🙂"}},
	} {
		got := words(tt.in)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("words(%q) (-want +got):\n%s", tt.in, diff)
		}
		if strings.Join(got, "") != tt.in {
			t.Errorf("words(%q) joined is %q", tt.in, strings.Join(got, ""))
		}
	}
}

// deltas collects the pieces a stream hands on.
type deltas struct {
	mu     sync.Mutex
	pieces []string
}

func (d *deltas) add(s string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pieces = append(d.pieces, s)
}

func (d *deltas) got() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.pieces...)
}

// The echo models stream their answer word by word, StreamDelay apart, and
// end with the Result Complete gives.
func TestStreamEcho(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{}
	g := New(nil, WithClock(clock))
	m, _ := g.Catalogue().ByName("echo-reverse")
	m.StreamDelay = 40 * time.Millisecond
	req := Request{Messages: []Message{{Role: RoleUser, Content: "abc def  ghi"}}}
	var d deltas

	got := g.Stream(t.Context(), m, req, d.add)

	want := g.Complete(t.Context(), m, req)
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Result{}, "Latency")); diff != "" {
		t.Errorf("Stream's result (-Complete's +Stream's):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"ihg", "  fed", " cba"}, d.got()); diff != "" {
		t.Errorf("pieces (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]time.Duration{40 * time.Millisecond, 40 * time.Millisecond}, clock.slept()); diff != "" {
		t.Errorf("pauses (-want +got):\n%s", diff)
	}
}

// A long answer streams faster rather than time out: the pauses take at
// most half the model's timeout together (200 words, 30 ms apart, under a
// 5 s timeout: 6 s of pauses would outlast it).
func TestStreamEchoPacingFitsTheTimeout(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{}
	g := New(nil, WithClock(clock))
	m, _ := g.Catalogue().ByName("echo")
	m.StreamDelay, m.Timeout = 30*time.Millisecond, 5*time.Second
	prompt := strings.TrimSpace(strings.Repeat("word ", 201))
	var d deltas
	got := g.Stream(t.Context(), m, Request{Messages: []Message{{Role: RoleUser, Content: prompt}}}, d.add)
	if got.Err != nil || got.Text != prompt || len(d.got()) != 201 {
		t.Fatalf("result %+v after %d pieces, want the whole echo", got.Err, len(d.got()))
	}
	var total time.Duration
	for _, p := range clock.slept() {
		total += p
		if p != 2500*time.Millisecond/200 {
			t.Fatalf("a pause of %s, want 12.5ms (2.5 s over 200 pauses)", p)
		}
	}
	if total > m.Timeout/2 {
		t.Errorf("pauses of %s in all, want at most half the timeout", total)
	}
}

// slowClock is a fakeClock whose sleeps last twice what was asked, as a
// timer's slack does with short pauses on a busy machine.
type slowClock struct{ fakeClock }

func (c *slowClock) Sleep(ctx context.Context, d time.Duration) error {
	return c.fakeClock.Sleep(ctx, 2*d)
}

// The pacing keeps to its plan however long each pause lasts: pauses that
// overrun are not added up past the timeout (a prompt of 5 000 words, each
// pause 0.5 ms asked and longer slept, took more than the echo model's 5 s
// and failed the turn with a 502). A word a pause behind goes out with the
// others due, without waiting.
func TestStreamEchoKeepsToItsPlanWhenPausesOverrun(t *testing.T) {
	t.Parallel()
	clock := &slowClock{}
	g := New(nil, WithClock(clock))
	m, _ := g.Catalogue().ByName("echo")
	m.StreamDelay, m.Timeout = 30*time.Millisecond, 5*time.Second
	prompt := strings.TrimSpace(strings.Repeat("word ", 5001))
	var d deltas
	got := g.Stream(t.Context(), m, Request{Messages: []Message{{Role: RoleUser, Content: prompt}}}, d.add)
	if got.Err != nil || got.Text != prompt || strings.Join(d.got(), "") != prompt {
		t.Fatalf("result %+v, %d pieces joined to %d bytes; want the whole echo", got.Err, len(d.got()), len(strings.Join(d.got(), "")))
	}
	var total time.Duration
	for _, p := range clock.slept() {
		total += p
	}
	if plan := m.Timeout / 2; total > plan+2*plan/5000 {
		t.Errorf("pauses of %s in all for a plan of %s", total, plan)
	}
	if n := len(d.got()); n < 2 || n > 5001 {
		t.Errorf("%d pieces", n)
	}
}

// A caller that gives up ends an echo stream between two words.
func TestStreamEchoCancelled(t *testing.T) {
	t.Parallel()
	g := New(nil)
	m := g.Catalogue().Default()
	m.StreamDelay = time.Hour
	ctx, cancel := context.WithCancel(t.Context())
	var d deltas
	got := g.Stream(ctx, m, Request{Messages: []Message{{Role: RoleUser, Content: "one two"}}}, func(s string) {
		d.add(s)
		cancel()
	})
	if got.Err == nil || got.Err.Kind != KindUnavailable || got.Text != "" {
		t.Errorf("result %+v, want unavailable (cancelled) without text", got)
	}
	if diff := cmp.Diff([]string{"one"}, d.got()); diff != "" {
		t.Errorf("pieces (-want +got):\n%s", diff)
	}
}

// sseProvider is an OpenAI-compatible server that streams scripted chunks.
type sseProvider struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	replies []sseReply
	bodies  []map[string]any
}

// sseReply is one scripted answer: an error status, or data lines sent gap
// apart (then [DONE] unless cut).
type sseReply struct {
	status int
	data   []string
	gap    time.Duration
	cut    bool // end the connection abruptly after the data
}

func newSSEProvider(t *testing.T, replies ...sseReply) *sseProvider {
	t.Helper()
	p := &sseProvider{t: t, replies: replies}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *sseProvider) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		p.t.Errorf("sse provider: the request is not JSON: %s", raw)
	}
	p.mu.Lock()
	n := len(p.bodies)
	p.bodies = append(p.bodies, body)
	rep := p.replies[min(n, len(p.replies)-1)]
	p.mu.Unlock()
	if rep.status != 0 && rep.status != http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.status)
		_, _ = io.WriteString(w, errorJSON("boom"))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	for i, d := range rep.data {
		if i > 0 && rep.gap > 0 {
			select {
			case <-time.After(rep.gap):
			case <-r.Context().Done():
				return
			}
		}
		_, _ = fmt.Fprintf(w, "data: %s\n\n", d)
		_ = rc.Flush()
	}
	if rep.cut {
		conn, _, err := rc.Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

func (p *sseProvider) requests() []map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]map[string]any(nil), p.bodies...)
}

func (p *sseProvider) model(retries int) Model {
	return Model{ID: 5, Name: "streamer", Provider: ProviderOpenAI, BaseURL: p.srv.URL + "/v1", ProviderModel: "test-model",
		Timeout: 2 * time.Second, Retries: retries}
}

// chunk is a chat.completion.chunk with content (and a finish_reason when finish is set).
func chunk(content, finish string) string {
	text, _ := json.Marshal(content)
	reason := "null"
	if finish != "" {
		reason = fmt.Sprintf("%q", finish)
	}
	return fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","created":1700000000,"model":"test-model",`+
		`"choices":[{"index":0,"delta":{"role":"assistant","content":%s},"finish_reason":%s}]}`, text, reason)
}

const usageChunk = `{"id":"c1","object":"chat.completion.chunk","created":1700000000,"model":"test-model","choices":[],` +
	`"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`

func TestStreamOpenAI(t *testing.T) {
	t.Parallel()
	p := newSSEProvider(t, sseReply{data: []string{chunk("Par", ""), chunk("is", ""), chunk(".", "stop"), usageChunk}, gap: 5 * time.Millisecond})
	g := New(nil)
	var d deltas
	req := Request{Messages: []Message{{Role: RoleUser, Content: "Capital of France?"}}, Params: Params{Temperature: ptr(0.0)}}

	got := g.Stream(t.Context(), p.model(0), req, d.add)

	if got.Err != nil {
		t.Fatalf("Stream: %v", got.Err)
	}
	if got.Text != "Paris." || got.Attempts != 1 || got.Usage != (Usage{PromptTokens: 9, CompletionTokens: 3, TotalTokens: 12}) {
		t.Errorf("result %+v", got)
	}
	if diff := cmp.Diff([]string{"Par", "is", "."}, d.got()); diff != "" {
		t.Errorf("pieces (-want +got):\n%s", diff)
	}
	want := map[string]any{
		"model": "test-model", "messages": []any{map[string]any{"role": "user", "content": "Capital of France?"}},
		"temperature": 0.0, "stream": true, "stream_options": map[string]any{"include_usage": true},
	}
	if diff := cmp.Diff(want, p.requests()[0]); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
}

func TestStreamOpenAIFailures(t *testing.T) {
	t.Parallel()
	good := sseReply{data: []string{chunk("fine", "stop")}}
	tests := []struct {
		name         string
		replies      []sseReply
		wantKind     string // "" for success
		wantMessage  string
		wantPieces   []string
		wantRequests int
	}{
		{"a 500 before any piece is retried", []sseReply{{status: 500}, good}, "", "", []string{"fine"}, 2},
		{"a 400 is not retried", []sseReply{{status: 400}, good}, KindUpstream, "streamer answered 400 Bad Request: boom", nil, 1},
		{
			"a connection lost before any piece is retried",
			[]sseReply{{cut: true}, good}, "", "", []string{"fine"}, 2,
		},
		{
			"a connection lost after a piece is not retried",
			[]sseReply{{data: []string{chunk("half", "")}, cut: true}, good}, KindUnavailable, "streamer's stream broke off", []string{"half"}, 1,
		},
		{
			"an error event while streaming",
			[]sseReply{{data: []string{chunk("half", ""), `{"error":{"message":"overloaded","type":"server_error"}}`}}, good},
			KindUpstream, "streamer failed while streaming", []string{"half"}, 1,
		},
		{
			"a stream that ends without a finish_reason",
			[]sseReply{{data: []string{chunk("half", "")}}, good}, KindBadResponse, "streamer's stream ended before the answer was finished", []string{"half"}, 1,
		},
		{
			"a malformed chunk",
			[]sseReply{{data: []string{`{"choices": [`}}, good}, KindBadResponse, "streamer streamed a malformed chat completion", nil, 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newSSEProvider(t, tt.replies...)
			g := New(nil, WithClock(&fakeClock{}))
			var d deltas

			got := g.Stream(t.Context(), p.model(2), Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}}, d.add)

			switch {
			case tt.wantKind == "" && got.Err != nil:
				t.Errorf("Stream failed: %v", got.Err)
			case tt.wantKind != "" && (got.Err == nil || got.Err.Kind != tt.wantKind || got.Err.Message != tt.wantMessage):
				t.Errorf("Stream = %+v (error %v), want a %s error %q", got, got.Err, tt.wantKind, tt.wantMessage)
			case tt.wantKind != "" && got.Text != "":
				t.Errorf("a failed stream has text %q", got.Text)
			}
			if diff := cmp.Diff(tt.wantPieces, d.got()); diff != "" {
				t.Errorf("pieces (-want +got):\n%s", diff)
			}
			if n := len(p.requests()); n != tt.wantRequests || got.Attempts != tt.wantRequests {
				t.Errorf("%d requests, %d attempts; want %d", n, got.Attempts, tt.wantRequests)
			}
		})
	}
}

// The model's timeout bounds the whole stream.
func TestStreamOpenAITimeout(t *testing.T) {
	t.Parallel()
	p := newSSEProvider(t, sseReply{data: []string{chunk("slow", ""), chunk("er", "stop")}, gap: 5 * time.Second})
	m := p.model(0)
	m.Timeout = 200 * time.Millisecond
	var d deltas
	got := New(nil).Stream(t.Context(), m, Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}}, d.add)
	if got.Err == nil || got.Err.Kind != KindTimeout {
		t.Fatalf("Stream = %+v, want a timeout", got)
	}
	if diff := cmp.Diff([]string{"slow"}, d.got()); diff != "" {
		t.Errorf("pieces (-want +got):\n%s", diff)
	}
}

// StreamAll runs the models in parallel: each piece and each end is told
// with its model's index, and the results come in the models' order.
func TestStreamAll(t *testing.T) {
	t.Parallel()
	slow := newSSEProvider(t, sseReply{data: []string{chunk("slow", ""), chunk(" answer", "stop")}, gap: 100 * time.Millisecond})
	g := New(nil)
	echo := g.Catalogue().Default()
	echo.StreamDelay = 0
	models := []Model{slow.model(0), echo}
	var mu sync.Mutex
	var order []string
	pieces := map[int]string{}
	results := g.StreamAll(t.Context(), models, Request{Messages: []Message{{Role: RoleUser, Content: "fast answer"}}},
		func(i int, s string) { mu.Lock(); pieces[i] += s; mu.Unlock() },
		func(i int, r Result) { mu.Lock(); order = append(order, r.Model.Name); mu.Unlock() })
	if results[0].Text != "slow answer" || results[1].Text != "fast answer" {
		t.Errorf("results %q, %q", results[0].Text, results[1].Text)
	}
	if pieces[0] != "slow answer" || pieces[1] != "fast answer" {
		t.Errorf("pieces %v", pieces)
	}
	if diff := cmp.Diff([]string{"echo", "streamer"}, order); diff != "" {
		t.Errorf("the models ended in the order (-want +got):\n%s", diff)
	}
}

// LongestCall bounds a streamed turn: every attempt of the slowest model
// and the waits between them.
func TestLongestCall(t *testing.T) {
	t.Parallel()
	c, err := NewCatalogue(
		Model{ID: 1, Name: "echo", Provider: ProviderEcho, Timeout: time.Second, Default: true},
		Model{ID: 2, Name: "gpt", Provider: ProviderOpenAI, BaseURL: "http://localhost/v1", ProviderModel: "m", Timeout: 30 * time.Second, Retries: 2},
	)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.LongestCall(), 3*30*time.Second+2*defaultBackoffMax; got != want {
		t.Errorf("LongestCall() = %s, want %s", got, want)
	}
}
