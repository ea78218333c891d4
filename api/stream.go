package api

// Streamed practice turns (DESIGN §13): with Accept: text/event-stream, run
// and chat answer with Server-Sent Events as the models answer. The turn
// runs apart from the client: it is recorded when every model has ended,
// whether or not the client is still there to see it.

import (
	"bytes"
	"context"
	"errors"
	"mime"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"lectern/aggregates"
	"lectern/commands"
	"lectern/events"
)

const (
	// DefaultStreamHeartbeat is how often a stream with nothing to say sends
	// a comment, so that proxies and load balancers keep it open.
	DefaultStreamHeartbeat = 15 * time.Second
	// streamWriteWait bounds each write of a stream (the server's
	// WriteTimeout would cut a long one): a client that reads nothing for
	// that long is given up on, and the turn goes on without it.
	streamWriteWait = 30 * time.Second
)

// streamedTurns are the operations that stream on request (see openAPI).
var streamedTurns = map[string]bool{"run_practice_session": true, "continue_practice_session": true}

// wantsStream: the client accepts text/event-stream (with a q above 0).
func wantsStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil || mt != "text/event-stream" {
				continue
			}
			if q, ok := params["q"]; ok {
				if f, err := strconv.ParseFloat(q, 64); err == nil && f <= 0 {
					continue
				}
			}
			return true
		}
	}
	return false
}

// The events' data, fields in the order of the JSON answer's.
type (
	streamSessionJSON struct {
		SessionID int64 `json:"session_id"`
	}
	streamDeltaJSON struct {
		ModelName string `json:"model_name"`
		Text      string `json:"text"`
	}
	// turnModelDoneJSON is a model's result as the turn will show it, but
	// for what only recording the turn gives it (ids, created_at).
	turnModelDoneJSON struct {
		ModelName    string             `json:"model_name"`
		ResponseText string             `json:"response_text"`
		TokenUsage   events.TokenUsage  `json:"token_usage"`
		LatencyMS    int64              `json:"latency_ms"`
		IsPrimary    bool               `json:"is_primary"`
		Error        *events.ModelError `json:"error"`
	}
	streamModelErrorJSON struct {
		ModelName string            `json:"model_name"`
		Error     events.ModelError `json:"error"`
	}
)

// streamComponents are the schemas of the events' data.
func streamComponents() schema {
	return schema{
		"StreamSession": object(schema{"session_id": integer()}, "session_id"),
		"StreamDelta":   object(schema{"model_name": str(), "text": str()}, "model_name", "text"),
		"TurnModelDone": object(schema{
			"model_name": str(), "response_text": str(), "token_usage": ref("TurnTokenUsage"), "latency_ms": integer(),
			"is_primary": boolean(), "error": schema{"type": "null"},
		}, "model_name", "response_text", "token_usage", "latency_ms", "is_primary", "error"),
		"StreamModelError": object(schema{"model_name": str(), "error": ref("TurnModelError")}, "model_name", "error"),
	}
}

// streamContent documents the text/event-stream answer of a turn.
func streamContent() schema {
	return schema{
		"schema": schema{"type": "string", "description": "Server-Sent Events: `event: <name>` and `data: <JSON>` lines, " +
			"a blank line after each event; lines starting with ':' are heartbeats. First `session`; then, as the models " +
			"answer, `delta` (a piece of a model's answer, in order), and per model `done` (its result) or `error` (its " +
			"failure); last `turn`, the JSON answer, once the turn is recorded. If every model failed, the last event is " +
			"`error` with the 502 detail and nothing is recorded. X-Event-Position and X-Projection-Pending come as trailers; " +
			"no Location is sent (the status goes out before the session is recorded): the `session` event names the session."},
		"x-sse-events": schema{
			"session": ref("StreamSession"),
			"delta":   ref("StreamDelta"),
			"done":    ref("TurnModelDone"),
			"error":   schema{"anyOf": []any{ref("StreamModelError"), ref("ErrorDetail")}},
			"turn":    ref("SessionTurn"),
		},
	}
}

type sseEvent struct {
	name string
	data []byte
}

// turnRelay is a streamed turn's observer: it queues the events for the
// handler without bound, so that the models never wait on the client.
type turnRelay struct {
	mu     sync.Mutex
	queue  []sseEvent
	closed bool
	wake   chan struct{}
}

var _ commands.TurnObserver = (*turnRelay)(nil)

func newTurnRelay() *turnRelay { return &turnRelay{wake: make(chan struct{}, 1)} }

func (q *turnRelay) push(name string, v any) {
	q.mu.Lock()
	q.queue = append(q.queue, sseEvent{name: name, data: mustJSON(v)})
	q.mu.Unlock()
	q.signal()
}

func (q *turnRelay) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// close says the turn has ended: no event follows.
func (q *turnRelay) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

// take returns the events queued so far, and whether the turn has ended.
func (q *turnRelay) take() ([]sseEvent, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.queue
	q.queue = nil
	return out, q.closed
}

func (q *turnRelay) Started(sessionID int64) {
	q.push("session", streamSessionJSON{SessionID: sessionID})
}

func (q *turnRelay) Delta(model, text string) {
	q.push("delta", streamDeltaJSON{ModelName: model, Text: text})
}

func (q *turnRelay) Ended(a aggregates.ModelAnswer, primary bool) {
	if a.Error != nil {
		q.push("error", streamModelErrorJSON{ModelName: a.Model.Name, Error: *a.Error})
		return
	}
	q.push("done", turnModelDoneJSON{ModelName: a.Model.Name, ResponseText: a.Text, TokenUsage: a.Usage,
		LatencyMS: a.Latency.Milliseconds(), IsPrimary: primary})
}

// turnRun runs a turn, telling obs of its progress.
type turnRun func(ctx context.Context, obs commands.TurnObserver) (aggregates.Session, commands.Result, error)

// streamTurn answers a turn as Server-Sent Events. Until its models are
// called nothing is sent, so that a refusal (401, 403, 404, 422, ...) is the
// ordinary JSON answer; from then on every outcome is an event.
//
// The turn runs in its own goroutine, on a context that only its own bound
// ends; this handler relays its events. A client that goes away stops the
// relaying, not the turn: the handler still waits for the turn (so a
// graceful shutdown does too) and it is recorded as usual.
//
// Where the response cannot be flushed (an Idempotency-Key's response is
// kept whole, to be replayed), the events are sent together at the end, and
// a turn whose every model failed is the ordinary 502, which is not kept.
func (s *Server) streamTurn(w http.ResponseWriter, r *http.Request, status int, run turnRun) error {
	relay := newTurnRelay()
	// The write's own context: its client's leaving does not end it, its
	// bound does (writeBound: its models' longest call, and WriteWait for
	// its reads, its append and the wait for its read models).
	ctx := r.Context()
	var (
		state aggregates.Session
		res   commands.Result
		err   error
	)
	go func() {
		defer relay.close()
		// A panic here is no handler's to recover: it would end the
		// process. It is the turn's 500 instead, logged as accessLog logs
		// a handler's.
		defer func() {
			if p := recover(); p != nil {
				if s.deps.Logger != nil {
					s.deps.Logger.Error("panic", "panic", p, "stack", string(debug.Stack()), "request_id", requestID(ctx))
				}
				err = errTurnPanicked
			}
		}()
		state, res, err = run(ctx, relay)
	}()

	out := newSSEWriter(w, status, s)
	heartbeat := time.NewTicker(s.heartbeat())
	defer heartbeat.Stop()
	for {
		evs, ended := relay.take()
		out.send(evs...)
		if ended {
			break // take saw close, which follows run's results
		}
		select {
		case <-relay.wake:
		case <-heartbeat.C:
			out.ping()
		}
	}

	if err != nil {
		if !out.live || !out.started {
			return s.turnFailure(w, r, err)
		}
		out.send(sseEvent{name: "error", data: s.errorBody(r, err)})
		return nil
	}
	// The turn event comes once the read models have the turn, as the JSON
	// answer does; the headers are gone by then, so its position goes in
	// trailers (or in the headers of a response sent whole).
	settled := &bufferedResponse{header: http.Header{}}
	s.settle(settled, r, res, sessionReadModels...)
	out.trailers(settled.header, "X-Event-Position", "X-Projection-Pending")
	out.send(sseEvent{name: "turn", data: mustJSON(turnFromState(state))})
	out.finish()
	return nil
}

// errTurnPanicked is the error of a streamed turn whose run panicked: a
// 500, the panic logged.
var errTurnPanicked = errors.New("the practice turn panicked (see the log's panic line)")

func (s *Server) heartbeat() time.Duration {
	if s.deps.StreamHeartbeat > 0 {
		return s.deps.StreamHeartbeat
	}
	return DefaultStreamHeartbeat
}

// errorBody is the JSON error answer err would have had, for an error
// event: it is rendered (and logged) as without streaming.
func (s *Server) errorBody(r *http.Request, err error) []byte {
	rec := &bufferedResponse{header: http.Header{}}
	if err := s.turnFailure(rec, r, err); err != nil {
		writeError(rec, r, s.deps.Logger, err)
	}
	return bytes.TrimSpace(rec.body.Bytes())
}

// sseWriter writes the events of one response: live (flushed as they come)
// when the response can be flushed, else kept and sent whole by finish.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	status  int
	s       *Server
	live    bool
	started bool // the first event was sent (or kept)
	gone    bool // the client went away: nothing more is written
	kept    bytes.Buffer
}

func newSSEWriter(w http.ResponseWriter, status int, s *Server) *sseWriter {
	return &sseWriter{w: w, rc: http.NewResponseController(w), status: status, s: s, live: canFlush(w)}
}

// canFlush walks w's wrappers as http.ResponseController does.
func canFlush(w http.ResponseWriter) bool {
	for {
		switch t := w.(type) {
		case interface{ FlushError() error }, http.Flusher:
			return true
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return false
		}
	}
}

func (o *sseWriter) start() {
	o.started = true
	h := o.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: pass each event on at once
	if !o.live {
		return
	}
	// The request's body is read: its deadline must not end the
	// connection's background read (which sees a client leave) mid-stream.
	_ = o.rc.SetReadDeadline(time.Time{})
	_ = o.rc.SetWriteDeadline(time.Now().Add(streamWriteWait))
	o.w.WriteHeader(o.status)
}

// send writes events, then flushes them.
func (o *sseWriter) send(evs ...sseEvent) {
	if len(evs) == 0 {
		return
	}
	if !o.started {
		o.start()
	}
	var b bytes.Buffer
	for _, ev := range evs {
		b.WriteString("event: ")
		b.WriteString(ev.name)
		b.WriteString("\ndata: ")
		b.Write(ev.data) // compact JSON: one line
		b.WriteString("\n\n")
	}
	o.write(b.Bytes())
}

// ping is a heartbeat: a comment, which clients ignore.
func (o *sseWriter) ping() {
	if o.live && o.started {
		o.write([]byte(": ping\n\n"))
	}
}

func (o *sseWriter) write(p []byte) {
	if !o.live {
		o.kept.Write(p)
		return
	}
	if o.gone {
		return
	}
	_ = o.rc.SetWriteDeadline(time.Now().Add(streamWriteWait))
	_, err := o.w.Write(p)
	if err == nil {
		err = o.rc.Flush()
	}
	if err != nil {
		o.gone = true
		o.s.deps.Logger.Info("the client of a streamed turn went away; the turn goes on", "error", err)
	}
}

// trailers sets headers that come after the body (in the headers when the
// response is sent whole).
func (o *sseWriter) trailers(from http.Header, names ...string) {
	for _, name := range names {
		v := from.Get(name)
		if v == "" {
			continue
		}
		if o.live {
			o.w.Header().Set(http.TrailerPrefix+name, v)
		} else {
			o.w.Header().Set(name, v)
		}
	}
}

// finish sends a response kept whole.
func (o *sseWriter) finish() {
	if o.live {
		return
	}
	o.w.WriteHeader(o.status)
	_, _ = o.w.Write(o.kept.Bytes())
}
