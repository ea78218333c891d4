package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
)

// Stream calls one model as Complete does, and hands each piece of its
// answer to onDelta as it arrives; the pieces, in order, make Result.Text.
// OpenAI-compatible providers stream through openai-go's streaming API; the
// echo models answer word by word, Model.StreamDelay apart.
//
// An attempt that fails before any piece arrived is retried as Complete
// retries; one that fails after is not (the pieces were handed on), and
// its Result has the error and no text. onDelta is called from the calling
// goroutine and must not block for long: the provider's stream waits for it.
func (g *Gateway) Stream(ctx context.Context, model Model, req Request, onDelta func(text string)) Result {
	start := g.clock.Now()
	res := Result{Model: model}
	if onDelta == nil {
		onDelta = func(string) {}
	}
	if err := req.check(); err != nil {
		res.Err = err
	} else if ctx.Err() != nil {
		res.Err = contextError(ctx, model)
	} else {
		switch model.Provider {
		case ProviderEcho, ProviderEchoReverse:
			g.streamEcho(ctx, model, req, &res, onDelta)
		case ProviderOpenAI:
			g.streamOpenAI(ctx, model, req, &res, onDelta)
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

// StreamAll streams models in parallel, as CompleteAll calls them:
// onDelta(i, text) is a piece of models[i]'s answer, and onDone(i, result)
// is called once models[i] has ended, before StreamAll returns. Both are
// called from the models' goroutines, concurrently for different models.
func (g *Gateway) StreamAll(ctx context.Context, models []Model, req Request, onDelta func(i int, text string), onDone func(i int, r Result)) []Result {
	results := make([]Result, len(models))
	parallel(len(models), func(i int) {
		results[i] = g.Stream(ctx, models[i], req, func(text string) { onDelta(i, text) })
		onDone(i, results[i])
	})
	return results
}

// defaultBackoffMax is the default ceiling of a wait between two attempts.
const defaultBackoffMax = 5 * time.Second

// LongestCall is the longest a call to one of c's models may take with the
// gateway's default backoff: each attempt's timeout, and the longest wait
// between two attempts.
func (c *Catalogue) LongestCall() time.Duration {
	var longest time.Duration
	for _, m := range c.models {
		d := attemptTimeout(m)*time.Duration(m.Retries+1) + defaultBackoffMax*time.Duration(m.Retries)
		longest = max(longest, d)
	}
	return longest
}

// attemptTimeout bounds one attempt of a call to m.
func attemptTimeout(m Model) time.Duration {
	if m.Timeout <= 0 { // a Model built by hand, not from a validated catalogue
		return DefaultTimeout
	}
	return m.Timeout
}

// streamEcho answers as echo does, a word at a time: each piece is a word
// with the spaces before it, the first without a pause. The pauses are
// pacing, not work: together they are planned to take at most half the
// model's timeout, so a long prompt streams faster rather than time out.
// The plan is kept to, not each pause: a sleep lasts longer than asked
// (by a timer's slack, a busy machine), and thousands of short pauses
// added up past the timeout. A word a pause or more behind its time is not
// waited for, and goes out with the others due by then, in one piece.
func (g *Gateway) streamEcho(ctx context.Context, m Model, req Request, res *Result, onDelta func(string)) {
	var answer Result
	g.echo(m, req, &answer)
	res.Attempts = 1
	actx, cancel := context.WithTimeout(ctx, attemptTimeout(m))
	defer cancel()
	pieces := words(answer.Text)
	pause := m.StreamDelay
	if n := len(pieces) - 1; n > 0 && pause*time.Duration(n) > attemptTimeout(m)/2 {
		pause = attemptTimeout(m) / 2 / time.Duration(n)
	}
	start := g.clock.Now()
	due := func(i int) time.Time { return start.Add(pause * time.Duration(i)) }
	for i := 0; i < len(pieces); {
		if i > 0 && pause > 0 && g.clock.Now().Sub(due(i)) < pause {
			if err := g.clock.Sleep(actx, pause); err != nil {
				res.Err = contextError(ctx, m)
				if ctx.Err() == nil {
					res.Err = &Error{Kind: KindTimeout, Message: fmt.Sprintf("%s did not answer within %s", m.Name, attemptTimeout(m)), cause: err}
				}
				return
			}
		}
		j := i + 1
		if pause > 0 {
			for now := g.clock.Now(); j < len(pieces) && now.Sub(due(j)) >= pause; j++ {
			}
		}
		onDelta(strings.Join(pieces[i:j], ""))
		i = j
	}
	res.Text, res.Usage = answer.Text, answer.Usage
}

// words splits s into pieces that each end with a word, whitespace going
// with the word after it (trailing whitespace with the last word): joined,
// they are s again.
func words(s string) []string {
	var out []string
	start, prevSpace := 0, true
	for i, r := range s {
		space := unicode.IsSpace(r)
		if space && !prevSpace {
			out = append(out, s[start:i])
			start = i
		}
		prevSpace = space
	}
	if rest := s[start:]; rest != "" {
		if strings.TrimSpace(rest) == "" && len(out) > 0 {
			out[len(out)-1] += rest
		} else {
			out = append(out, rest)
		}
	}
	return out
}

// streamOpenAI streams from an OpenAI-compatible provider with the retry
// policy of completeOpenAI, except that nothing is retried once a piece of
// the answer was handed on.
func (g *Gateway) streamOpenAI(ctx context.Context, m Model, req Request, res *Result, onDelta func(string)) {
	svc := g.chatService(m)
	params := chatParams(m, req)
	// The usage comes in a last chunk, only when asked for.
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	g.retry(ctx, m, res, func() attemptResult { return g.streamAttempt(ctx, svc, m, params, onDelta) })
}

// errIncomplete: a stream that ended without a finish_reason, cut short.
var errIncomplete = errors.New("the stream ended before the answer was finished")

// streamAttempt makes one streamed request, bounded by the model's timeout
// (the whole stream, as for a call that is not streamed).
func (g *Gateway) streamAttempt(ctx context.Context, svc openai.ChatCompletionService, m Model, params openai.ChatCompletionNewParams, onDelta func(string)) attemptResult {
	timeout := attemptTimeout(m)
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var raw *http.Response
	stream := svc.NewStreaming(actx, params, option.WithResponseInto(&raw))
	defer func() { _ = stream.Close() }()
	var text strings.Builder
	var usage Usage
	finished, delivered := false, false
	for stream.Next() {
		chunk := stream.Current()
		if u := chunk.Usage; u.TotalTokens > 0 || u.PromptTokens > 0 || u.CompletionTokens > 0 {
			usage = Usage{PromptTokens: int(u.PromptTokens), CompletionTokens: int(u.CompletionTokens), TotalTokens: int(u.TotalTokens)}
		}
		for _, c := range chunk.Choices {
			if c.Index != 0 {
				continue // only the first choice is asked for (n is not sent)
			}
			if c.Delta.Content != "" {
				text.WriteString(c.Delta.Content)
				delivered = true
				onDelta(c.Delta.Content)
			}
			if c.FinishReason != "" {
				finished = true
			}
		}
	}
	err := stream.Err()
	if err == nil && !finished {
		err = errIncomplete
	}
	if err == nil {
		if usage.TotalTokens == 0 {
			usage.TotalTokens = usage.PromptTokens + usage.CompletionTokens
		}
		return attemptResult{text: text.String(), usage: usage, retryAfter: -1}
	}
	out := g.streamFailure(ctx, actx, m, timeout, raw, err)
	if delivered {
		// Its first pieces were handed on: a retry would hand them on again.
		out.retryable = false
	}
	return out
}

// streamFailure classifies a failed streamed attempt: as failure does, but a
// stream that broke off after a 200 is a lost connection (retryable), a
// provider's error event is upstream, and one cut short or unreadable is a
// bad response.
func (g *Gateway) streamFailure(ctx, actx context.Context, m Model, timeout time.Duration, raw *http.Response, err error) attemptResult {
	if ctx.Err() != nil || actx.Err() != nil || raw == nil || raw.StatusCode < 200 || raw.StatusCode > 299 {
		return g.failure(ctx, actx, m, timeout, raw, err)
	}
	out := attemptResult{retryAfter: -1}
	var streamErr *ssestream.StreamError
	var netErr net.Error
	switch {
	case errors.As(err, &streamErr):
		out.err = &Error{Kind: KindUpstream, Message: fmt.Sprintf("%s failed while streaming", m.Name), Status: raw.StatusCode, cause: err}
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &netErr):
		out.err = &Error{Kind: KindUnavailable, Message: fmt.Sprintf("%s's stream broke off", m.Name), cause: err}
		out.retryable = true
	case errors.Is(err, errIncomplete):
		out.err = &Error{Kind: KindBadResponse, Message: fmt.Sprintf("%s's stream ended before the answer was finished", m.Name), Status: raw.StatusCode, cause: err}
	default:
		out.err = &Error{Kind: KindBadResponse, Message: fmt.Sprintf("%s streamed a malformed chat completion", m.Name), Status: raw.StatusCode, cause: err}
	}
	return out
}
