package llm

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func ptr[T any](v T) *T { return &v }

func TestOpenAISendsTheRequest(t *testing.T) {
	t.Parallel()
	f := newFakeProvider(t, reply{text: "Paris."})
	g := New(nil, WithLookupEnv(env(map[string]string{"TEST_KEY": "sk-test"})))
	m := fakeModel(3, "fake", f)
	req := Request{
		Messages: []Message{
			{Role: RoleSystem, Content: "Answer briefly."},
			{Role: RoleUser, Content: "Capital of Italy?"},
			{Role: RoleAssistant, Content: "Rome."},
			{Role: RoleUser, Content: "Capital of France?"},
		},
		Params: Params{Temperature: ptr(0.0), TopP: ptr(0.5), MaxTokens: ptr(64)},
	}

	got := g.Complete(t.Context(), m, req)

	if got.Err != nil {
		t.Fatalf("Complete: %v", got.Err)
	}
	if diff := cmp.Diff(Usage{PromptTokens: 11, CompletionTokens: 7, TotalTokens: 18}, got.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	if got.Text != "Paris." || got.Attempts != 1 || got.Model.Name != "fake" || got.Latency <= 0 {
		t.Errorf("result = %+v, want text Paris., 1 attempt, model fake, a latency", got)
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("provider got %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Method != http.MethodPost || r.Path != "/v1/chat/completions" {
		t.Errorf("request %s %s, want POST /v1/chat/completions", r.Method, r.Path)
	}
	if a := r.Header.Get("Authorization"); a != "Bearer sk-test" {
		t.Errorf("Authorization = %q, want Bearer sk-test", a)
	}
	want := map[string]any{
		"model": "test-model",
		"messages": []any{
			map[string]any{"role": "system", "content": "Answer briefly."},
			map[string]any{"role": "user", "content": "Capital of Italy?"},
			map[string]any{"role": "assistant", "content": "Rome."},
			map[string]any{"role": "user", "content": "Capital of France?"},
		},
		"temperature": 0.0,
		"top_p":       0.5,
		"max_tokens":  64.0,
	}
	if diff := cmp.Diff(want, r.Body); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
}

func TestOpenAIOmitsWhatIsNotGiven(t *testing.T) {
	t.Parallel()
	f := newFakeProvider(t)
	g := New(nil, WithLookupEnv(env(nil))) // TEST_KEY unset: no key
	req := Request{
		Messages: []Message{{Role: RoleUser, Content: "hi"}},
		Params:   Params{MaxCompletionTokens: ptr(100)},
	}

	got := g.Complete(t.Context(), fakeModel(3, "fake", f), req)

	if got.Err != nil {
		t.Fatalf("Complete: %v", got.Err)
	}
	r := f.requests()[0]
	if a, ok := r.Header["Authorization"]; ok {
		t.Errorf("Authorization = %q, want none", a)
	}
	want := map[string]any{
		"model":                 "test-model",
		"messages":              []any{map[string]any{"role": "user", "content": "hi"}},
		"max_completion_tokens": 100.0,
	}
	if diff := cmp.Diff(want, r.Body); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
}

// Not parallel: it sets the process environment.
func TestOpenAIIgnoresAmbientOpenAIEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-ambient")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	t.Setenv("OPENAI_ORG_ID", "org-ambient")
	f := newFakeProvider(t)
	m := fakeModel(3, "fake", f)
	m.APIKeyEnv = ""

	got := New(nil).Complete(t.Context(), m, Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}})

	if got.Err != nil {
		t.Fatalf("Complete: %v", got.Err)
	}
	h := f.requests()[0].Header
	if h.Get("Authorization") != "" || h.Get("OpenAI-Organization") != "" {
		t.Errorf("headers leak the ambient OPENAI_* environment: %v", h)
	}
}

func TestOpenAIFailuresAndRetries(t *testing.T) {
	t.Parallel()
	ok := reply{text: "fine"}
	tests := []struct {
		name         string
		replies      []reply
		retries      int
		wantKind     string // "" for success
		wantStatus   int
		wantMessage  string // a part of Err.Message
		hidden       string // a part of the provider's message Err.Message must not show
		wantRequests int
		wantSleeps   func(t *testing.T, sleeps []time.Duration)
	}{
		{
			name:         "500 then success is retried",
			replies:      []reply{{status: 500, body: errorJSON("boom")}, ok},
			retries:      2,
			wantRequests: 2,
			wantSleeps:   sleepsBetween(100*time.Millisecond, 200*time.Millisecond),
		},
		{
			name:         "503 with a plain-text body then success",
			replies:      []reply{{status: 503, body: "upstream overloaded"}, ok},
			retries:      1,
			wantRequests: 2,
		},
		{
			name:         "429 with Retry-After then success waits as asked",
			replies:      []reply{{status: 429, header: map[string]string{"Retry-After": "1"}, body: errorJSON("slow down")}, ok},
			retries:      2,
			wantRequests: 2,
			wantSleeps:   sleepsEqual(time.Second),
		},
		{
			name:         "429 with retry-after-ms then success",
			replies:      []reply{{status: 429, header: map[string]string{"Retry-After-Ms": "30"}, body: errorJSON("slow down")}, ok},
			retries:      2,
			wantRequests: 2,
			wantSleeps:   sleepsEqual(30 * time.Millisecond),
		},
		{
			name:         "429 with a Retry-After beyond the backoff cap is not waited for",
			replies:      []reply{{status: 429, header: map[string]string{"Retry-After": "60"}, body: errorJSON("quota")}, ok},
			retries:      2,
			wantKind:     KindRateLimited,
			wantStatus:   429,
			wantMessage:  "fake answered 429 Too Many Requests",
			hidden:       "quota", // the school's account, not the student's business
			wantRequests: 1,
			wantSleeps:   sleepsEqual(),
		},
		{
			name:         "400 is not retried",
			replies:      []reply{{status: 400, body: errorJSON("bad temperature")}, ok},
			retries:      2,
			wantKind:     KindUpstream,
			wantStatus:   400,
			wantMessage:  "400 Bad Request: bad temperature",
			wantRequests: 1,
			wantSleeps:   sleepsEqual(),
		},
		{
			name:         "a 401 quoting the key shows none of it",
			replies:      []reply{{status: 401, body: errorJSON("Incorrect API key provided: sk-proj-ab*****yz.")}, ok},
			retries:      2,
			wantKind:     KindUpstream,
			wantStatus:   401,
			wantMessage:  "fake answered 401 Unauthorized",
			hidden:       "sk-proj",
			wantRequests: 1,
			wantSleeps:   sleepsEqual(),
		},
		{
			name:         "5xx until retries run out",
			replies:      []reply{{status: 502, body: errorJSON("bad gateway")}},
			retries:      2,
			wantKind:     KindUpstream,
			wantStatus:   502,
			wantRequests: 3,
			wantSleeps:   sleepsBetween(100*time.Millisecond, 400*time.Millisecond),
		},
		{
			name:         "no retries configured",
			replies:      []reply{{status: 500, body: errorJSON("boom")}, ok},
			retries:      0,
			wantKind:     KindUpstream,
			wantStatus:   500,
			wantRequests: 1,
		},
		{
			name:         "malformed JSON answer",
			replies:      []reply{{body: `{"choices": [{"message": {"content": "x"`}, ok},
			retries:      2,
			wantKind:     KindBadResponse,
			wantStatus:   200,
			wantRequests: 1,
		},
		{
			name:         "answer without choices",
			replies:      []reply{{body: `{"id": "x", "choices": []}`}, ok},
			retries:      2,
			wantKind:     KindBadResponse,
			wantRequests: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeProvider(t, tt.replies...)
			clock := &fakeClock{}
			g := New(nil, WithClock(clock), WithLookupEnv(env(nil)))
			m := fakeModel(3, "fake", f)
			m.Retries = tt.retries

			got := g.Complete(t.Context(), m, Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}})

			if n := len(f.requests()); n != tt.wantRequests || got.Attempts != n {
				t.Errorf("provider got %d requests, result says %d attempts; want %d", n, got.Attempts, tt.wantRequests)
			}
			if tt.wantKind == "" {
				if got.Err != nil || got.Text != "fine" {
					t.Fatalf("result = %q, %v; want fine", got.Text, got.Err)
				}
			} else {
				if got.Err == nil {
					t.Fatalf("result = %q, want an error of kind %s", got.Text, tt.wantKind)
				}
				if got.Err.Kind != tt.wantKind || got.Err.Status != tt.wantStatus || !strings.Contains(got.Err.Message, tt.wantMessage) {
					t.Errorf("Err = %+v, want kind %s, status %d, message with %q", got.Err, tt.wantKind, tt.wantStatus, tt.wantMessage)
				}
				if tt.hidden != "" && strings.Contains(got.Err.Message, tt.hidden) {
					t.Errorf("Err.Message %q shows the provider's %q", got.Err.Message, tt.hidden)
				}
				if got.Text != "" {
					t.Errorf("Text = %q with an error", got.Text)
				}
			}
			sleeps := clock.slept()
			if tt.wantSleeps != nil {
				tt.wantSleeps(t, sleeps)
			}
			var total time.Duration
			for _, s := range sleeps {
				total += s
			}
			if got.Latency < total {
				t.Errorf("Latency = %s, want at least the %s waited", got.Latency, total)
			}
		})
	}
}

func sleepsEqual(want ...time.Duration) func(*testing.T, []time.Duration) {
	return func(t *testing.T, got []time.Duration) {
		t.Helper()
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("waits (-want +got):\n%s", diff)
		}
	}
}

// sleepsBetween checks there was at least one wait and every wait lies in [lo, hi].
func sleepsBetween(lo, hi time.Duration) func(*testing.T, []time.Duration) {
	return func(t *testing.T, got []time.Duration) {
		t.Helper()
		if len(got) == 0 {
			t.Errorf("no wait between attempts")
		}
		for _, d := range got {
			if d < lo || d > hi {
				t.Errorf("waited %s, want between %s and %s", d, lo, hi)
			}
		}
	}
}

func TestOpenAIRetryWithTheRealClock(t *testing.T) {
	t.Parallel()
	f := newFakeProvider(t, reply{status: 500, body: errorJSON("boom")}, reply{text: "fine"})
	g := New(nil, WithBackoff(20*time.Millisecond, 100*time.Millisecond))

	got := g.Complete(t.Context(), fakeModel(3, "fake", f), Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}})

	if got.Err != nil || got.Text != "fine" || got.Attempts != 2 {
		t.Fatalf("result = %q, %v after %d attempts; want fine after 2", got.Text, got.Err, got.Attempts)
	}
	reqs := f.requests()
	if gap := reqs[1].At.Sub(reqs[0].At); gap < 10*time.Millisecond {
		t.Errorf("retried after %s, want a backoff of at least 10ms", gap)
	}
	if got.Latency < 10*time.Millisecond {
		t.Errorf("Latency = %s, want all attempts counted", got.Latency)
	}
}

func TestOpenAIUnreachableIsRetried(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/v1"
	srv.Close() // nothing listens there any more
	clock := &fakeClock{}
	g := New(nil, WithClock(clock))
	m := Model{ID: 3, Name: "gone", Provider: ProviderOpenAI, BaseURL: url, ProviderModel: "m", Timeout: time.Second, Retries: 2}

	got := g.Complete(t.Context(), m, Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}})

	if got.Err == nil || got.Err.Kind != KindUnavailable || got.Err.Status != 0 {
		t.Fatalf("Err = %v, want kind unavailable", got.Err)
	}
	if got.Attempts != 3 || len(clock.slept()) != 2 {
		t.Errorf("%d attempts, %d waits; want 3 and 2", got.Attempts, len(clock.slept()))
	}
	if got.Err.Unwrap() == nil || !strings.Contains(got.Err.Error(), "gone could not be reached") {
		t.Errorf("Error() = %q, want the cause kept for logs", got.Err.Error())
	}
}

func TestCompleteAllTimeoutLeavesOthersAlone(t *testing.T) {
	t.Parallel()
	slowFake := newFakeProvider(t, reply{delay: 10 * time.Second, text: "too late"})
	fastFake := newFakeProvider(t, reply{text: "quick"})
	slow := fakeModel(3, "slow", slowFake)
	// Bounds wide enough for a loaded machine: a timeout well apart from
	// the fast model's answer and from the slow provider's 10 s.
	slow.Timeout = time.Second
	slow.Retries = 2 // a timed-out attempt is not retried
	fast := fakeModel(4, "fast", fastFake)
	echo, _ := DefaultCatalogue().ByName("echo")
	g := New(nil, WithLookupEnv(env(nil)))

	start := time.Now()
	got := g.CompleteAll(t.Context(), []Model{slow, fast, echo}, Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}})
	wall := time.Since(start)

	if len(got) != 3 || got[0].Model.Name != "slow" || got[1].Model.Name != "fast" || got[2].Model.Name != "echo" {
		t.Fatalf("results not in the order of the models: %+v", got)
	}
	if got[0].Err == nil || got[0].Err.Kind != KindTimeout || got[0].Text != "" {
		t.Errorf("slow: %q, %v; want a timeout", got[0].Text, got[0].Err)
	}
	if l := got[0].Latency; l < slow.Timeout || l > 2*slow.Timeout {
		t.Errorf("slow latency = %s, want close to its %s timeout", l, slow.Timeout)
	}
	if n := len(slowFake.requests()); n != 1 || got[0].Attempts != 1 {
		t.Errorf("slow model got %d requests (%d attempts), want 1: a timeout is not retried", n, got[0].Attempts)
	}
	if got[1].Err != nil || got[1].Text != "quick" || got[1].Latency > slow.Timeout/2 {
		t.Errorf("fast: %q, %v in %s; want quick, fast", got[1].Text, got[1].Err, got[1].Latency)
	}
	if got[2].Err != nil || got[2].Text != "hi" {
		t.Errorf("echo: %q, %v; want hi", got[2].Text, got[2].Err)
	}
	if wall > 2*slow.Timeout {
		t.Errorf("CompleteAll took %s, want about the slowest timeout", wall)
	}
}

func TestCompleteAllRunsInParallel(t *testing.T) {
	t.Parallel()
	// Each provider answers only once both requests have arrived: one after
	// the other, the first would wait in vain (then 503, after at most the
	// models' 2 s timeout) and never be answered.
	meet := newRendezvous(2, 5*time.Second)
	a := newFakeProvider(t, reply{meet: meet, text: "a"})
	b := newFakeProvider(t, reply{meet: meet, text: "b"})
	g := New(nil, WithLookupEnv(env(nil)))
	models := []Model{fakeModel(3, "a", a), fakeModel(4, "b", b)}

	got := g.CompleteAll(t.Context(), models, Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}})

	for i, want := range []string{"a", "b"} {
		if got[i].Err != nil || got[i].Text != want {
			t.Errorf("result %d = %q, %v; want %q (both requests under way at once)", i, got[i].Text, got[i].Err, want)
		}
	}
	for i, f := range []*fakeProvider{a, b} {
		if n := len(f.requests()); n != 1 {
			t.Errorf("provider %d got %d requests, want 1", i, n)
		}
	}
}

func TestCompleteHonoursTheCallersContext(t *testing.T) {
	t.Parallel()
	f := newFakeProvider(t, reply{delay: 10 * time.Second})
	g := New(nil, WithLookupEnv(env(nil)))
	m := fakeModel(3, "fake", f) // timeout 2s
	req := Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}}

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	got := g.Complete(ctx, m, req)
	if got.Err == nil || got.Err.Kind != KindTimeout || got.Latency > time.Second {
		t.Errorf("caller's deadline: %v after %s, want a timeout after about 50ms", got.Err, got.Latency)
	}

	cancelled, cancelNow := context.WithCancel(t.Context())
	cancelNow()
	got = g.Complete(cancelled, m, req)
	if got.Err == nil || got.Err.Kind != KindUnavailable || got.Attempts != 0 {
		t.Errorf("cancelled: %v after %d attempts, want unavailable and no request", got.Err, got.Attempts)
	}
}
