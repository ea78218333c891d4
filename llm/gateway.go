// Package llm is Lectern's model gateway: a catalogue of logical model names
// (models.yaml) and a Gateway that calls them, one at a time or several in
// parallel.
//
// Providers are the built-in offline models (echo, echo-reverse) and any
// OpenAI-compatible chat completions server, reached through openai-go. A call
// never returns a Go error: each Result carries either the answer or an *Error
// of a known Kind, so that one failing model of a turn never hides the others.
//
// Model calls are slow and may take the whole of a model's timeout: never make
// them while holding a database transaction.
package llm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Message roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Message is one message of a chat, in order.
type Message struct {
	Role    string // RoleSystem, RoleUser or RoleAssistant
	Content string
}

// Params are generation parameters; nil means "not sent" (the provider's
// default), while a pointer to zero sends zero (temperature 0 is sent).
type Params struct {
	Temperature, TopP              *float64
	MaxTokens, MaxCompletionTokens *int
}

// Request is what a model is asked.
type Request struct {
	Messages []Message
	Params   Params
}

// Usage is the token usage of a call, as reported by the provider (counted as
// whitespace-separated words by the echo models).
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Result is the outcome of calling one model.
type Result struct {
	Model Model
	Text  string
	Usage Usage
	// Latency is the wall time of the call, all its attempts and waits included.
	Latency time.Duration
	// Attempts is the number of requests made (1 for the echo models).
	Attempts int
	// Err is nil on success.
	Err *Error
}

// Kinds of Error.
const (
	// KindTimeout: an attempt ran out of the model's timeout, or the caller's deadline passed.
	KindTimeout = "timeout"
	// KindRateLimited: the provider answered 429 on the last attempt.
	KindRateLimited = "rate_limited"
	// KindUpstream: the provider answered another error status (Status says which).
	KindUpstream = "upstream"
	// KindBadResponse: the provider answered 2xx with a body that is not a chat completion.
	KindBadResponse = "bad_response"
	// KindUnavailable: the provider could not be reached, the provider kind is
	// unknown, or the caller cancelled.
	KindUnavailable = "unavailable"
	// KindInvalidRequest: the request itself is unusable (no messages, an unknown role).
	KindInvalidRequest = "invalid_request"
)

// Error is why a model call failed. Message is a short sentence fit for the
// client; the underlying cause (for logs) is in Error() and Unwrap().
type Error struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
	// Status is the provider's HTTP status, 0 when there was none.
	Status int `json:"status,omitempty"`
	cause  error
}

func (e *Error) Error() string {
	s := "llm: " + e.Kind + ": " + e.Message
	if e.cause != nil {
		s += ": " + e.cause.Error()
	}
	return s
}

// Unwrap returns the underlying cause, if any.
func (e *Error) Unwrap() error { return e.cause }

// Clock tells the time (latencies) and waits (backoff between attempts).
// Tests replace it to retry without waiting.
type Clock interface {
	Now() time.Time
	// Sleep waits d, or returns ctx.Err() when ctx is done first.
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Gateway calls the models of a catalogue. It is safe for concurrent use.
type Gateway struct {
	catalogue   *Catalogue
	httpClient  *http.Client
	clock       Clock
	lookupEnv   func(string) (string, bool)
	backoffBase time.Duration
	backoffMax  time.Duration
	observe     func(Result)
}

// Option configures a Gateway.
type Option func(*Gateway)

// WithHTTPClient sets the HTTP client for OpenAI-compatible providers. Leave
// its Timeout zero: each attempt is bounded by the model's timeout.
func WithHTTPClient(c *http.Client) Option { return func(g *Gateway) { g.httpClient = c } }

// WithClock replaces the real clock.
func WithClock(c Clock) Option { return func(g *Gateway) { g.clock = c } }

// WithLookupEnv replaces os.LookupEnv for reading API keys.
func WithLookupEnv(f func(string) (string, bool)) Option {
	return func(g *Gateway) { g.lookupEnv = f }
}

// WithBackoff sets the wait before retry n (0-based): base·2ⁿ with jitter,
// capped at ceiling. A Retry-After longer than ceiling is not waited for: the call
// fails at once. Defaults: 200 ms and 5 s.
// WithObserver sets a function called with the Result of every Complete
// (metrics); it must be fast and safe for concurrent use.
func WithObserver(f func(Result)) Option { return func(g *Gateway) { g.observe = f } }

// WithBackoff
func WithBackoff(base, ceiling time.Duration) Option {
	return func(g *Gateway) { g.backoffBase, g.backoffMax = base, ceiling }
}

// New returns a gateway over c (DefaultCatalogue when c is nil).
func New(c *Catalogue, opts ...Option) *Gateway {
	if c == nil {
		c = DefaultCatalogue()
	}
	g := &Gateway{
		catalogue:   c,
		httpClient:  &http.Client{},
		clock:       realClock{},
		lookupEnv:   os.LookupEnv,
		backoffBase: 200 * time.Millisecond,
		backoffMax:  defaultBackoffMax,
	}
	for _, o := range opts {
		o(g)
	}
	return g
}

// Catalogue returns the gateway's catalogue.
func (g *Gateway) Catalogue() *Catalogue { return g.catalogue }

// Complete calls one model. Each attempt is bounded by model.Timeout (and by
// ctx); failures of kind rate_limited, upstream 5xx and unavailable
// (connection errors) are retried up to model.Retries times after a short
// backoff or the provider's Retry-After; a timed-out attempt, a 4xx and a
// malformed answer are not retried.
func (g *Gateway) Complete(ctx context.Context, model Model, req Request) Result {
	start := g.clock.Now()
	res := Result{Model: model}
	if err := req.check(); err != nil {
		res.Err = err
	} else if ctx.Err() != nil {
		res.Err = contextError(ctx, model)
	} else {
		switch model.Provider {
		case ProviderEcho, ProviderEchoReverse:
			g.echo(model, req, &res)
		case ProviderOpenAI:
			g.completeOpenAI(ctx, model, req, &res)
		default:
			res.Err = &Error{Kind: KindUnavailable, Message: fmt.Sprintf("unknown provider %q", model.Provider)}
		}
	}
	res.Latency = g.clock.Now().Sub(start)
	if g.observe != nil {
		g.observe(res)
	}
	return res
}

// CompleteAll calls models in parallel and returns their results in the order
// of models. Each model has its own timeout, and one model's failure never
// cancels the others; only ctx (the caller's) bounds them all.
//
// It may take as long as the slowest model's timeout and retries: call it
// outside any database transaction, and record the results afterwards.
func (g *Gateway) CompleteAll(ctx context.Context, models []Model, req Request) []Result {
	results := make([]Result, len(models))
	parallel(len(models), func(i int) { results[i] = g.Complete(ctx, models[i], req) })
	return results
}

// parallel runs f(0) to f(n-1) side by side and waits for them. A panic in
// one is raised again in the caller once all have ended, as a *Panic with
// its own stack: there the caller's recover (an HTTP handler's) sees it,
// where a goroutine's panic would end the process.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	var first atomic.Pointer[Panic]
	for i := range n {
		wg.Go(func() {
			defer func() {
				if p := recover(); p != nil {
					first.CompareAndSwap(nil, &Panic{Value: p, Stack: debug.Stack()})
				}
			}()
			f(i)
		})
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		panic(p)
	}
}

// Panic is a panic of a model's call, raised again in its caller.
type Panic struct {
	Value any
	Stack []byte // where it panicked
}

func (p *Panic) Error() string { return fmt.Sprintf("a model call panicked: %v\n%s", p.Value, p.Stack) }

func (r Request) check() *Error {
	if len(r.Messages) == 0 {
		return &Error{Kind: KindInvalidRequest, Message: "no messages"}
	}
	for i, m := range r.Messages {
		switch m.Role {
		case RoleSystem, RoleUser, RoleAssistant:
		default:
			return &Error{Kind: KindInvalidRequest, Message: fmt.Sprintf("message %d has unknown role %q", i, m.Role)}
		}
	}
	return nil
}

// contextError describes why ctx (the caller's) ended.
func contextError(ctx context.Context, m Model) *Error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &Error{Kind: KindTimeout, Message: fmt.Sprintf("%s did not answer before the request's deadline", m.Name), cause: ctx.Err()}
	}
	return &Error{Kind: KindUnavailable, Message: "the request was cancelled", cause: ctx.Err()}
}

// backoff is the wait before retry n: base·2ⁿ capped at max, minus up to half as jitter.
func (g *Gateway) backoff(n int) time.Duration {
	d := g.backoffBase
	for i := 0; i < n && d < g.backoffMax; i++ {
		d *= 2
	}
	d = min(d, g.backoffMax)
	if d <= 1 {
		return d
	}
	return d - rand.N(d/2)
}

// echo answers with the last user message (reversed for echo-reverse).
func (g *Gateway) echo(m Model, req Request, res *Result) {
	var prompt string
	words := 0
	for _, msg := range req.Messages {
		words += len(strings.Fields(msg.Content))
		if msg.Role == RoleUser {
			prompt = msg.Content
		}
	}
	if m.Provider == ProviderEchoReverse {
		r := []rune(prompt)
		for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
			r[i], r[j] = r[j], r[i]
		}
		prompt = string(r)
	}
	completion := len(strings.Fields(prompt))
	res.Attempts = 1
	res.Text = prompt
	res.Usage = Usage{PromptTokens: words, CompletionTokens: completion, TotalTokens: words + completion}
}
