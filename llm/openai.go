package llm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// completeOpenAI calls an OpenAI-compatible provider with our retry policy
// (openai-go's own retries are off).
func (g *Gateway) completeOpenAI(ctx context.Context, m Model, req Request, res *Result) {
	svc := g.chatService(m)
	params := chatParams(m, req)
	g.retry(ctx, m, res, func() attemptResult { return g.attempt(ctx, svc, m, params) })
}

// retry makes attempts until one succeeds, one fails in a way not worth
// retrying, or m.Retries are spent, waiting between them as the provider
// asks (Retry-After) or with backoff.
func (g *Gateway) retry(ctx context.Context, m Model, res *Result, attempt func() attemptResult) {
	for retry := 0; ; retry++ {
		res.Attempts++
		a := attempt()
		if a.err == nil {
			res.Text, res.Usage, res.Err = a.text, a.usage, nil
			return
		}
		res.Err = a.err
		if !a.retryable || retry >= m.Retries {
			return
		}
		wait := g.backoff(retry)
		if a.retryAfter >= 0 {
			wait = a.retryAfter
		}
		if wait > g.backoffMax {
			return // the provider asks for a longer wait than an interactive turn allows
		}
		if dl, ok := ctx.Deadline(); ok && !g.clock.Now().Add(wait).Before(dl) {
			return // the caller's deadline would pass while waiting
		}
		if err := g.clock.Sleep(ctx, wait); err != nil {
			res.Err = contextError(ctx, m)
			return
		}
	}
}

// chatService builds a client for m. It does not use openai.NewClient, which
// reads OPENAI_API_KEY, OPENAI_BASE_URL and friends from the environment: a
// model's only key is the one its api_key_env names.
func (g *Gateway) chatService(m Model) openai.ChatCompletionService {
	opts := []option.RequestOption{
		option.WithBaseURL(m.BaseURL),
		option.WithHTTPClient(g.httpClient),
		option.WithMaxRetries(0),
	}
	if m.APIKeyEnv != "" {
		if key, ok := g.lookupEnv(m.APIKeyEnv); ok && key != "" {
			opts = append(opts, option.WithAPIKey(key))
		}
	}
	return openai.NewChatCompletionService(opts...)
}

func chatParams(m Model, req Request) openai.ChatCompletionNewParams {
	p := openai.ChatCompletionNewParams{Model: m.ProviderModel}
	for _, msg := range req.Messages {
		switch msg.Role {
		case RoleSystem:
			p.Messages = append(p.Messages, openai.SystemMessage(msg.Content))
		case RoleUser:
			p.Messages = append(p.Messages, openai.UserMessage(msg.Content))
		case RoleAssistant:
			p.Messages = append(p.Messages, openai.AssistantMessage(msg.Content))
		}
	}
	// openai.Float/Int mark the field as set, so an explicit 0 is sent.
	if v := req.Params.Temperature; v != nil {
		p.Temperature = openai.Float(*v)
	}
	if v := req.Params.TopP; v != nil {
		p.TopP = openai.Float(*v)
	}
	if v := req.Params.MaxTokens; v != nil {
		p.MaxTokens = openai.Int(int64(*v))
	}
	if v := req.Params.MaxCompletionTokens; v != nil {
		p.MaxCompletionTokens = openai.Int(int64(*v))
	}
	return p
}

type attemptResult struct {
	text       string
	usage      Usage
	err        *Error
	retryable  bool
	retryAfter time.Duration // the provider's Retry-After; -1 when absent
}

// attempt makes one request, bounded by the model's timeout, and classifies its outcome.
func (g *Gateway) attempt(ctx context.Context, svc openai.ChatCompletionService, m Model, params openai.ChatCompletionNewParams) attemptResult {
	timeout := attemptTimeout(m)
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var raw *http.Response
	resp, err := svc.New(actx, params, option.WithResponseInto(&raw))
	out := attemptResult{retryAfter: -1}
	switch {
	case err == nil:
		if len(resp.Choices) == 0 {
			out.err = &Error{Kind: KindBadResponse, Message: fmt.Sprintf("%s answered without choices", m.Name)}
			return out
		}
		out.text = resp.Choices[0].Message.Content
		u := resp.Usage
		out.usage = Usage{PromptTokens: int(u.PromptTokens), CompletionTokens: int(u.CompletionTokens), TotalTokens: int(u.TotalTokens)}
		if out.usage.TotalTokens == 0 {
			out.usage.TotalTokens = out.usage.PromptTokens + out.usage.CompletionTokens
		}
	default:
		out = g.failure(ctx, actx, m, timeout, raw, err)
	}
	return out
}

// failure classifies an attempt that failed with err (ctx is the caller's,
// actx the attempt's own; raw the provider's response, if one came).
func (g *Gateway) failure(ctx, actx context.Context, m Model, timeout time.Duration, raw *http.Response, err error) attemptResult {
	out := attemptResult{retryAfter: -1}
	switch {
	case ctx.Err() != nil:
		out.err = contextError(ctx, m)
	case actx.Err() != nil:
		out.err = &Error{Kind: KindTimeout, Message: fmt.Sprintf("%s did not answer within %s", m.Name, timeout), cause: err}
	case raw != nil && (raw.StatusCode < 200 || raw.StatusCode > 299):
		status := raw.StatusCode
		msg := fmt.Sprintf("%s answered %d %s", m.Name, status, http.StatusText(status))
		var apiErr *openai.Error
		if errors.As(err, &apiErr) && apiErr.Message != "" && aboutTheRequest(status) {
			msg += ": " + apiErr.Message
		}
		out.err = &Error{Kind: KindUpstream, Message: msg, Status: status, cause: err}
		if status == http.StatusTooManyRequests {
			out.err.Kind = KindRateLimited
		}
		out.retryable = status == http.StatusTooManyRequests || status >= 500
		out.retryAfter = retryAfter(raw.Header, g.clock.Now())
	case raw != nil:
		out.err = &Error{Kind: KindBadResponse, Message: fmt.Sprintf("%s answered with a malformed chat completion", m.Name), Status: raw.StatusCode, cause: err}
	default:
		out.err = &Error{Kind: KindUnavailable, Message: fmt.Sprintf("%s could not be reached", m.Name), cause: err}
		out.retryable = true
	}
	return out
}

// aboutTheRequest reports whether a provider's refusal of status is about
// the request itself (its prompt too long, flagged, a parameter out of
// range), whose message the student who wrote it is shown. Other refusals
// are about the school's account (a key refused, OpenAI's 401 quoting part
// of it; a quota, a model not found) or the provider's own fault: their
// messages are not the student's to read, the status says enough.
func aboutTheRequest(status int) bool {
	return status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge || status == http.StatusUnprocessableEntity
}

// maxRetryAfter clamps absurd Retry-After values before they overflow a Duration.
const maxRetryAfter = 24 * time.Hour

// retryAfter reads the wait a provider asks for: retry-after-ms (OpenAI's,
// milliseconds) or Retry-After (seconds or an HTTP date); -1 when absent or unreadable.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(min(ms, maxRetryAfter.Seconds()*1000) * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return -1
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(min(s, maxRetryAfter.Seconds()) * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return -1
}
