package api_test

// Streamed practice turns: Accept: text/event-stream on run and chat, at the
// HTTP level, with clients that read everything, stop early or wait idle.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"lectern/llm"
	"lectern/pgtest"
	"lectern/poll"
	"lectern/service"
)

const eventStream = "text/event-stream"

// sseEvent is one event a client read.
type sseEvent struct {
	Name string
	Data json.RawMessage
}

func (ev sseEvent) String() string { return ev.Name + " " + string(ev.Data) }

// streamed is what a client of a streamed turn saw.
type streamed struct {
	Status   int
	Header   http.Header
	Trailer  http.Header
	Events   []sseEvent
	Comments []string // heartbeats
	Raw      []byte
	JSON     response // the answer when it was not a stream (a refusal)
}

// names are the events' names, in order.
func (s streamed) names() []string {
	out := make([]string, len(s.Events))
	for i, ev := range s.Events {
		out[i] = ev.Name
	}
	return out
}

// of decodes the data of the events named name.
func of[T any](t testing.TB, s streamed, name string) []T {
	t.Helper()
	var out []T
	for _, ev := range s.Events {
		if ev.Name != name {
			continue
		}
		var v T
		if err := json.Unmarshal(ev.Data, &v); err != nil {
			t.Fatalf("%s: %v", ev, err)
		}
		out = append(out, v)
	}
	return out
}

type deltaData struct {
	ModelName string `json:"model_name"`
	Text      string `json:"text"`
}

type doneData struct {
	ModelName    string          `json:"model_name"`
	ResponseText string          `json:"response_text"`
	TokenUsage   json.RawMessage `json:"token_usage"`
	LatencyMS    int64           `json:"latency_ms"`
	IsPrimary    bool            `json:"is_primary"`
	Error        json.RawMessage `json:"error"`
}

// stream sends a turn with Accept: text/event-stream and reads its events,
// each checked against the schema the OpenAPI document gives its name. A
// JSON answer (a refusal) is checked as do checks it. stop, if set, is
// called with each event: true closes the connection there.
func (e *env) stream(t testing.TB, path string, body any, token string, stop func(sseEvent) bool, headers ...string) streamed {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.URL+path, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", eventStream)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := e.httpClient().Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	out := streamed{Status: resp.StatusCode, Header: resp.Header}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), eventStream) {
		res := response{Method: http.MethodPost, Path: path, Status: resp.StatusCode, Header: resp.Header}
		if res.Body, err = io.ReadAll(resp.Body); err != nil {
			t.Fatal(err)
		}
		if res.JSON, err = decodeJSON(res.Body); err != nil {
			t.Errorf("%s: %v", res, err)
		}
		e.check(t, res)
		out.JSON = res
		return out
	}
	pointer := "#/paths/" + escapePointer(routeOf(path)) + fmt.Sprintf("/post/responses/%d/content/text~1event-stream/x-sse-events/", resp.StatusCode)
	r := bufio.NewReader(io.TeeReader(resp.Body, &rawWriter{&out.Raw}))
	var name string
	var data []string
	for {
		line, err := r.ReadString('\n')
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("POST %s: reading the stream: %v", path, err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if len(data) == 0 {
				continue
			}
			ev := sseEvent{Name: name, Data: json.RawMessage(strings.Join(data, "\n"))}
			name, data = "", nil
			e.doc.validateEvent(t, pointer+ev.Name, ev)
			out.Events = append(out.Events, ev)
			if stop != nil && stop(ev) {
				return out
			}
		case strings.HasPrefix(line, ":"):
			out.Comments = append(out.Comments, line)
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		default:
			t.Errorf("POST %s: a line that is not SSE: %q", path, line)
		}
	}
	out.Trailer = resp.Trailer
	return out
}

type rawWriter struct{ b *[]byte }

func (w *rawWriter) Write(p []byte) (int, error) { *w.b = append(*w.b, p...); return len(p), nil }

func routeOf(path string) string {
	if strings.Contains(path, "/run") {
		return sessionsPath + "/run"
	}
	return sessionsPath + "/{session_id}/chat"
}

// validateEvent checks an event's data against the schema at pointer.
func (d *apiDoc) validateEvent(t testing.TB, pointer string, ev sseEvent) {
	t.Helper()
	d.validateJSON(t, ev.String(), "data", pointer, ev.Data)
}

// wantTurnStream checks a stream that ended with its turn: session first,
// turn last, each model's deltas making its answer, and done (or error)
// once per model before the turn. It returns the turn.
func wantTurnStream(t testing.TB, s streamed, status int) turnBody {
	t.Helper()
	if s.Status != status || !strings.HasPrefix(s.Header.Get("Content-Type"), eventStream) {
		t.Fatalf("status %d, Content-Type %q (%s), want %d and a stream", s.Status, s.Header.Get("Content-Type"), s.JSON.Body, status)
	}
	names := s.names()
	if len(names) < 2 || names[0] != "session" || names[len(names)-1] != "turn" || slices.Index(names, "turn") != len(names)-1 {
		t.Fatalf("events %q: want session first, turn once and last", names)
	}
	var turn turnBody
	if err := json.Unmarshal(s.Events[len(s.Events)-1].Data, &turn); err != nil {
		t.Fatal(err)
	}
	if id := of[struct {
		SessionID int64 `json:"session_id"`
	}](t, s, "session")[0].SessionID; id != turn.SessionID {
		t.Errorf("the session event names session %d, the turn is of %d", id, turn.SessionID)
	}
	texts := map[string]string{}
	for _, d := range of[deltaData](t, s, "delta") {
		texts[d.ModelName] += d.Text
	}
	done := map[string]doneData{}
	for _, d := range of[doneData](t, s, "done") {
		if _, twice := done[d.ModelName]; twice {
			t.Errorf("two done events for %s", d.ModelName)
		}
		done[d.ModelName] = d
	}
	failed := map[string]bool{}
	for _, f := range of[struct {
		ModelName string `json:"model_name"`
	}](t, s, "error") {
		failed[f.ModelName] = true
	}
	for _, r := range turn.Results {
		if failed[r.ModelName] {
			if _, ok := done[r.ModelName]; ok || string(r.Error) == "null" {
				t.Errorf("%s failed: an error event and an error in the turn, no done", r.ModelName)
			}
			continue
		}
		if texts[r.ModelName] != r.ResponseText {
			t.Errorf("%s's deltas make %q, its answer is %q", r.ModelName, texts[r.ModelName], r.ResponseText)
		}
		d, ok := done[r.ModelName]
		if !ok {
			t.Errorf("no done event for %s", r.ModelName)
			continue
		}
		if d.ResponseText != r.ResponseText || string(d.TokenUsage) != string(r.TokenUsage) || d.LatencyMS != r.LatencyMS ||
			d.IsPrimary != r.IsPrimary || string(d.Error) != "null" {
			t.Errorf("%s's done event %+v differs from its result %+v", r.ModelName, d, r)
		}
	}
	if len(done)+len(failed) != len(turn.Results) {
		t.Errorf("%d done and %d error events for %d results", len(done), len(failed), len(turn.Results))
	}
	return turn
}

// The turn streams: deltas word by word, done per model, then the turn,
// which is the JSON answer, recorded and readable once it is sent.
func TestStreamedTurns(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	c := e.newClassroom(t, nil)
	u := c.student

	s := e.stream(t, runPath(c.class), map[string]any{"prompt_text": "Stream me four words", "model_names": []string{"echo", "echo-reverse"}}, u.Access, nil)
	turn := wantTurnStream(t, s, http.StatusCreated)
	if len(turn.Results) != 2 || turn.Results[0].ResponseText != "Stream me four words" || turn.Results[1].ResponseText != "sdrow ruof em maertS" {
		t.Fatalf("turn %+v", turn)
	}
	for _, model := range []string{"echo", "echo-reverse"} {
		n := 0
		for _, d := range of[deltaData](t, s, "delta") {
			if d.ModelName == model {
				n++
			}
		}
		if n != 4 {
			t.Errorf("%s streamed %d deltas, want 4 (a word each)", model, n)
		}
	}
	if s.Header.Get("Cache-Control") != "no-cache" || s.Trailer.Get("X-Event-Position") == "" || s.Trailer.Get("X-Projection-Pending") != "" {
		t.Errorf("headers %v, trailers %v: want no-cache, an X-Event-Position trailer and no pending projection", s.Header, s.Trailer)
	}
	// Read-your-writes: the turn event comes once the read models have the
	// turn; the turn is the session's, as the JSON answer would be.
	detail := e.do(t, "GET", sessionPath(turn.SessionID), nil, u.Access)
	wantStatus(t, detail, http.StatusOK)
	wantRecorded(t, detail, 1, turn)

	// The next turn streams too (chat, 200), on the session's models.
	s = e.stream(t, sessionPath(turn.SessionID)+"/chat", map[string]any{"prompt_text": "And again"}, u.Access, nil)
	next := wantTurnStream(t, s, http.StatusOK)
	if next.SessionID != turn.SessionID || len(next.Results) != 2 || next.Results[0].ResponseText != "And again" {
		t.Errorf("the next turn %+v", next)
	}
	wantRecorded(t, e.do(t, "GET", sessionPath(turn.SessionID), nil, u.Access), 2, next)

	// Without Accept: text/event-stream (or with q=0) the answer is JSON.
	for _, accept := range []string{"", "application/json", "text/event-stream;q=0"} {
		headers := []string{}
		if accept != "" {
			headers = []string{"Accept", accept}
		}
		res := e.do(t, "POST", sessionPath(turn.SessionID)+"/chat", map[string]any{"prompt_text": "JSON please"}, u.Access, headers...)
		wantStatus(t, res, http.StatusOK)
		wantHeader(t, res, "Content-Type", "application/json")
		if res.Header.Get("X-Event-Position") == "" {
			t.Errorf("%s: no X-Event-Position", res)
		}
	}
}

// wantRecorded checks that a session's detail holds turn n as streamed.
func wantRecorded(t testing.TB, detail response, n int, turn turnBody) {
	t.Helper()
	var got struct {
		Responses []turnResult `json:"responses"`
	}
	if err := json.Unmarshal(detail.Body, &got); err != nil {
		t.Fatal(err)
	}
	wantIDs := map[int64]turnResult{}
	for _, r := range turn.Results {
		wantIDs[r.ResponseID] = r
	}
	found := 0
	for _, r := range got.Responses {
		w, ok := wantIDs[r.ResponseID]
		if !ok {
			continue
		}
		found++
		if r.ResponseText != w.ResponseText || r.ModelName != w.ModelName || r.CreatedAt != w.CreatedAt || string(r.Error) != string(w.Error) {
			t.Errorf("response %d: recorded %+v, streamed %+v", r.ResponseID, r, w)
		}
	}
	if found != len(turn.Results) {
		t.Errorf("turn %d: %d of its %d responses are in the session: %s", n, found, len(turn.Results), detail.Body)
	}
}

// A refusal comes before any event: the ordinary JSON answer.
func TestStreamedTurnRefusals(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	c := e.newClassroom(t, nil)
	other := e.signUp(t)
	_, turn := e.startSession(t, c.student.Access, c.class, map[string]any{"prompt_text": "mine"})
	for _, tc := range []struct {
		name, path string
		body       any
		token      string
		status     int
	}{
		{"no token", runPath(c.class), map[string]any{"prompt_text": "hi"}, "", http.StatusUnauthorized},
		{"not enrolled", runPath(c.class), map[string]any{"prompt_text": "hi"}, other.Access, http.StatusForbidden},
		{"no such class", runPath(c.class + 1_000_000), map[string]any{"prompt_text": "hi"}, c.student.Access, http.StatusNotFound},
		{"no prompt", runPath(c.class), map[string]any{"model_names": []string{"echo"}}, c.student.Access, http.StatusUnprocessableEntity},
		{"unknown model", runPath(c.class), map[string]any{"prompt_text": "hi", "model_names": []string{"nope"}}, c.student.Access, http.StatusUnprocessableEntity},
		{"another's session", sessionPath(turn.SessionID) + "/chat", map[string]any{"prompt_text": "hi"}, other.Access, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := e.stream(t, tc.path, tc.body, tc.token, nil)
			if s.Status != tc.status || s.JSON.JSON == nil {
				t.Errorf("status %d, Content-Type %q: want %d as JSON", s.Status, s.Header.Get("Content-Type"), tc.status)
			}
		})
	}
}

// A model that fails is an error event, and its error is recorded with
// the turn; when every model fails, the stream ends with the 502's detail
// and nothing is recorded.
func TestStreamedTurnModelFailures(t *testing.T) {
	t.Parallel()
	broken := newFakeProvider(t, http.StatusInternalServerError, "")
	brokenModel := broken.model(1, "broken")
	brokenModel.Default = true
	streamer := newStreamingProvider(t, []string{"Streamed", " from", " a", " provider."}, 0, 5*time.Millisecond)
	e := newStreamEnv(t, streamEnvConfig{models: []llm.Model{brokenModel, streamer.model(2, "streamer"),
		{ID: 3, Name: "echo", Provider: llm.ProviderEcho, Timeout: time.Second, StreamDelay: time.Millisecond}}})
	c := e.newClassroom(t, nil)
	u := c.student

	s := e.stream(t, runPath(c.class), map[string]any{"prompt_text": "hello you", "model_names": []string{"broken", "streamer", "echo"}}, u.Access, nil)
	turn := wantTurnStream(t, s, http.StatusCreated)
	failures := of[struct {
		ModelName string          `json:"model_name"`
		Error     json.RawMessage `json:"error"`
	}](t, s, "error")
	if len(failures) != 1 || failures[0].ModelName != "broken" ||
		string(failures[0].Error) != `{"kind":"upstream","message":"broken answered 500 Internal Server Error"}` {
		t.Errorf("error events %+v", failures)
	}
	if r := turn.Results; r[0].ResponseText != "" || string(r[0].Error) != string(failures[0].Error) ||
		r[1].ResponseText != "Streamed from a provider." || string(r[1].TokenUsage) != `{"prompt_tokens":11,"completion_tokens":4,"total_tokens":15}` ||
		r[2].ResponseText != "hello you" {
		t.Errorf("results %+v", r)
	}
	wantRecorded(t, e.do(t, "GET", sessionPath(turn.SessionID), nil, u.Access), 1, turn)

	// Every model fails: the error event of each, then the 502's detail.
	s = e.stream(t, runPath(c.class), map[string]any{"prompt_text": "hello", "model_names": []string{"broken"}}, u.Access, nil)
	if diff := cmp.Diff([]string{"session", "error", "error"}, s.names()); diff != "" {
		t.Fatalf("events (-want +got):\n%s\n%s", diff, s.Raw)
	}
	if got := string(s.Events[2].Data); got != `{"detail":"Every model of the turn failed (broken: broken answered 500 Internal Server Error)"}` {
		t.Errorf("the last event's data %s", got)
	}
	var started struct {
		SessionID int64 `json:"session_id"`
	}
	_ = json.Unmarshal(s.Events[0].Data, &started)
	wantStatus(t, e.do(t, "GET", sessionPath(started.SessionID), nil, u.Access), http.StatusNotFound)
	list := e.do(t, "GET", sessionsPath, nil, u.Access)
	if total := num(t, list, "total"); total != 1 {
		t.Errorf("%s: %d sessions, want 1 (the failed turn records nothing)", list, total)
	}
}

// A client that goes away after the first delta finds the whole turn in its
// session afterwards: the turn runs apart from the client.
func TestStreamedTurnOutlivesItsClient(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t, streamEnvConfig{models: []llm.Model{{ID: 1, Name: "echo", Provider: llm.ProviderEcho, Timeout: 10 * time.Second,
		StreamDelay: 20 * time.Millisecond, Default: true}}})
	c := e.newClassroom(t, nil)
	u := c.student
	prompt := strings.TrimSpace(strings.Repeat("word ", 40))

	s := e.stream(t, runPath(c.class), map[string]any{"prompt_text": prompt}, u.Access, func(ev sseEvent) bool { return ev.Name == "delta" })
	if diff := cmp.Diff([]string{"session", "delta"}, s.names()); diff != "" {
		t.Fatalf("events before leaving (-want +got):\n%s", diff)
	}
	var started struct {
		SessionID int64 `json:"session_id"`
	}
	_ = json.Unmarshal(s.Events[0].Data, &started)

	// The session and its first turn are one append, which projections
	// apply whole, on either store: once the session reads back, so does
	// its turn.
	var detail response
	poll.Must(t, 20*time.Second, "the turn recorded after its client left", func() bool {
		detail = e.send(t, "GET", sessionPath(started.SessionID), nil, u.Access)
		return detail.Status == http.StatusOK
	})
	e.check(t, detail)
	if responses, _ := detail.JSON.(map[string]any)["responses"].([]any); len(responses) == 0 {
		t.Fatalf("the session read back without its first turn: %s", detail.Body)
	}
	if !strings.Contains(string(detail.Body), `"response_text":"`+prompt+`"`) {
		t.Errorf("the recorded turn is not the whole answer: %s", detail.Body)
	}
	poll.Must(t, 10*time.Second, "the server noticed its client leave", func() bool {
		return e.logs.contains("the client of a streamed turn went away")
	})
}

// An idle stream sends heartbeats (comments clients ignore).
func TestStreamHeartbeat(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t, streamEnvConfig{heartbeat: 10 * time.Millisecond, models: []llm.Model{{ID: 1, Name: "echo",
		Provider: llm.ProviderEcho, Timeout: 10 * time.Second, StreamDelay: 100 * time.Millisecond, Default: true}}})
	c := e.newClassroom(t, nil)

	s := e.stream(t, runPath(c.class), map[string]any{"prompt_text": "slow three words"}, c.student.Access, nil)
	wantTurnStream(t, s, http.StatusCreated)
	if len(s.Comments) == 0 || s.Comments[0] != ": ping" {
		t.Errorf("comments %q, want heartbeats between the words", s.Comments)
	}
}

// The server's write timeout does not cut a stream that outlasts it.
func TestStreamOutlastsTheWriteTimeout(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t, streamEnvConfig{writeTimeout: 300 * time.Millisecond, models: []llm.Model{{ID: 1, Name: "echo",
		Provider: llm.ProviderEcho, Timeout: 10 * time.Second, StreamDelay: 100 * time.Millisecond, Default: true}}})
	// Set up where requests have no write timeout (a sign-up may take longer).
	c := sharedEnv(t).newClassroom(t, nil)
	prompt := "a turn that takes longer than the server's write timeout"
	start := time.Now()

	s := e.stream(t, runPath(c.class), map[string]any{"prompt_text": prompt}, c.student.Access, nil)

	turn := wantTurnStream(t, s, http.StatusCreated)
	if turn.Results[0].ResponseText != prompt {
		t.Errorf("answer %q", turn.Results[0].ResponseText)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("the stream took %s: it did not outlast the write timeout", d)
	}
}

// Under an Idempotency-Key the stream is kept whole, sent at the end and
// replayed to a retry; the turn is recorded once.
func TestStreamedTurnWithIdempotencyKey(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	c := e.newClassroom(t, nil)
	u := c.student
	key := "stream-" + uniqueEmail()
	body := map[string]any{"prompt_text": "Once only", "model_names": []string{"echo"}}

	first := e.stream(t, runPath(c.class), body, u.Access, nil, "Idempotency-Key", key)
	turn := wantTurnStream(t, first, http.StatusCreated)
	if first.Header.Get("X-Event-Position") == "" {
		t.Errorf("a stream sent whole has its position in its headers: %v", first.Header)
	}
	again := e.stream(t, runPath(c.class), body, u.Access, nil, "Idempotency-Key", key)
	wantTurnStream(t, again, http.StatusCreated)
	if again.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(first.Raw, again.Raw) {
		t.Errorf("the retry is not the first answer replayed:\n%s\n%s", first.Raw, again.Raw)
	}
	list := e.do(t, "GET", sessionsPath, nil, u.Access)
	if total := num(t, list, "total"); total != 1 {
		t.Errorf("%d sessions, want 1 (session %d)", total, turn.SessionID)
	}
}

// streamingProvider is an OpenAI-compatible server that streams its answer:
// the first piece after firstToken, the next ones gap apart.
type streamingProvider struct {
	srv *httptest.Server
}

func newStreamingProvider(t testing.TB, pieces []string, firstToken, gap time.Duration) *streamingProvider {
	t.Helper()
	p := &streamingProvider{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", eventStream)
		rc := http.NewResponseController(w)
		wait := func(d time.Duration) bool {
			if d <= 0 {
				return true
			}
			select {
			case <-time.After(d):
				return true
			case <-r.Context().Done():
				return false
			}
		}
		for i, piece := range pieces {
			d := gap
			if i == 0 {
				d = firstToken
			}
			if !wait(d) {
				return
			}
			text, _ := json.Marshal(piece)
			finish := "null"
			if i == len(pieces)-1 {
				finish = `"stop"`
			}
			_, _ = fmt.Fprintf(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":%s},"finish_reason":%s}]}`+"\n\n", text, finish)
			_ = rc.Flush()
		}
		_, _ = fmt.Fprintf(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":%d,"total_tokens":%d}}`+"\n\ndata: [DONE]\n\n",
			len(pieces), 11+len(pieces))
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *streamingProvider) model(id int64, name string) llm.Model {
	return llm.Model{ID: id, Name: name, Provider: llm.ProviderOpenAI, BaseURL: p.srv.URL + "/v1", ProviderModel: "m", Timeout: 5 * time.Second}
}

type streamEnvConfig struct {
	models       []llm.Model       // nil: the default catalogue
	heartbeat    time.Duration     // 0: the default
	writeTimeout time.Duration     // the HTTP server's WriteTimeout; 0: none
	transport    http.RoundTripper // the model gateway's; nil: the default
}

// newStreamEnv starts an HTTP tier (the shared service projects) for
// streamed turns, as newModelEnv does, with cfg. It signs tokens with the
// shared service's key: the shared service's users may call it.
func newStreamEnv(t *testing.T, cfg streamEnvConfig) *env {
	t.Helper()
	shared := sharedEnv(t)
	var cat *llm.Catalogue
	if cfg.models != nil {
		var err error
		if cat, err = llm.NewCatalogue(cfg.models...); err != nil {
			t.Fatal(err)
		}
	}
	e := &env{pool: pgtest.Pool(t), mail: &mailbox{}, logs: &logLines{}, key: shared.key}
	svc, err := service.New(service.Config{
		Pool: e.pool, JWTKey: e.key, DataKey: dataKey, Mail: e.mail, AddressLimit: 100000,
		Logger:          slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Models:          cat,
		ModelOptions:    []llm.Option{llm.WithHTTPClient(&http.Client{Transport: cfg.transport})},
		EventStoreURL:   eventStoreURL(t),
		ConsistencyWait: pgtest.ConsistencyWait,
		StreamHeartbeat: cfg.heartbeat,
	})
	if err != nil {
		t.Fatalf("service.New: %v", err)
	}
	e.svc = svc
	stopBackground := svc.RunBackground(context.Background(), false)
	e.srv = httptest.NewUnstartedServer(svc.Handler)
	e.srv.Config.WriteTimeout = cfg.writeTimeout
	e.srv.Start()
	e.stop = func() {
		e.srv.Close()
		stopBackground()
	}
	t.Cleanup(e.stop)
	if e.doc, err = loadDoc(e.srv.URL); err != nil {
		t.Fatalf("loading the OpenAPI document: %v", err)
	}
	return e
}

// contains reports whether a line of the log holds s.
func (l *logLines) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.lines, func(line string) bool { return strings.Contains(line, s) })
}

// The default catalogue's echo model (stream_delay 30ms, timeout 5s) streams
// a long prompt whole: its pauses take at most half its timeout (200 words at
// 30 ms would take 6 s, and failed as a timeout). The practice page always
// streams.
func TestStreamedEchoOfALongPrompt(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t) // the default model catalogue (models.yaml)
	c := e.newClassroom(t, nil)
	words := make([]string, 200)
	for i := range words {
		words[i] = "word"
	}
	prompt := strings.Join(words, " ") // 999 characters
	body := map[string]any{"prompt_text": prompt, "model_names": []string{"echo"}}

	res := e.do(t, "POST", runPath(c.class), body, c.student.Access)
	wantStatus(t, res, http.StatusCreated) // as JSON: answered

	s := e.stream(t, runPath(c.class), body, c.student.Access, nil)
	if n := len(s.Events); n == 0 || s.Events[n-1].Name != "turn" {
		t.Fatalf("the streamed turn of the same prompt did not end with its turn: %d events, the last ones %v", n, s.Events[max(0, n-2):])
	}
	turn := wantTurnStream(t, s, http.StatusCreated)
	if turn.Results[0].ResponseText != prompt {
		t.Errorf("echo answered %q", turn.Results[0].ResponseText)
	}
}

// A provider's U+0000 is replaced by U+FFFD in the recorded turn (a text
// column cannot hold it), and in the stream's delta and done events as well:
// what the client is shown is what the turn event and GET say.
func TestStreamedTurnShowsWhatItRecords(t *testing.T) {
	t.Parallel()
	streamer := newStreamingProvider(t, []string{"nul", "\x00", " here."}, 0, time.Millisecond)
	m := streamer.model(1, "streamer")
	m.Default = true
	e := newStreamEnv(t, streamEnvConfig{models: []llm.Model{m}})
	c := e.newClassroom(t, nil)

	s := e.stream(t, runPath(c.class), map[string]any{"prompt_text": "hi"}, c.student.Access, nil)
	if s.Status != http.StatusCreated || len(s.Events) == 0 || s.Events[len(s.Events)-1].Name != "turn" {
		t.Fatalf("status %d, events %q", s.Status, s.names())
	}
	var turn turnBody
	if err := json.Unmarshal(s.Events[len(s.Events)-1].Data, &turn); err != nil {
		t.Fatal(err)
	}
	recorded := turn.Results[0].ResponseText
	streamedText := ""
	for _, d := range of[deltaData](t, s, "delta") {
		streamedText += d.Text
	}
	done := of[doneData](t, s, "done")
	if streamedText != recorded {
		t.Errorf("the deltas make %q, the turn (and the session) records %q", streamedText, recorded)
	}
	if len(done) != 1 || done[0].ResponseText != recorded {
		t.Errorf("the done events say %q, the turn records %q", of[struct {
			ResponseText string `json:"response_text"`
		}](t, s, "done"), recorded)
	}
}

// A practice turn answered as JSON (no Accept: text/event-stream) that takes
// longer than the HTTP server's WriteTimeout still gets its answer: its
// write deadline moves past its bound, as a streamed turn's does at each
// event. (It lost its answer, the turn recorded: cmd/lectern serves with a
// WriteTimeout of 120 s, and a turn may run a minute plus its models'
// longest call.)
func TestTurnOutlastingTheWriteTimeoutAnswers(t *testing.T) {
	t.Parallel()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(600 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1700000000,"model":"m",`+
			`"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"slow answer","refusal":null}}],`+
			`"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`)
	}))
	t.Cleanup(slow.Close)
	streamer := newStreamingProvider(t, []string{"slow ", "answer"}, 600*time.Millisecond, time.Millisecond)
	e := newStreamEnv(t, streamEnvConfig{writeTimeout: 300 * time.Millisecond, models: []llm.Model{{ID: 1, Name: "slow",
		Provider: llm.ProviderOpenAI, BaseURL: slow.URL + "/v1", ProviderModel: "m", Timeout: 5 * time.Second, Default: true},
		streamer.model(2, "slow-stream")}})
	c := sharedEnv(t).newClassroom(t, nil) // set up where requests have no write timeout

	// Under an Idempotency-Key the answer is kept whole until the turn is
	// recorded (a stream too): the deadline must reach the connection
	// through the kept answer (a review found the client cut off there).
	for _, tc := range []struct{ name, accept, model, key string }{
		{"whole", "application/json", "slow", ""},
		{"whole, under a key", "application/json", "slow", "slow-whole-" + uniqueEmail()},
		{"streamed, under a key", "text/event-stream", "slow-stream", "slow-stream-" + uniqueEmail()},
	} {
		req, err := http.NewRequest(http.MethodPost, e.srv.URL+runPath(c.class),
			strings.NewReader(`{"prompt_text":"take your time","model_names":["`+tc.model+`"]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", tc.accept)
		req.Header.Set("Authorization", "Bearer "+c.student.Access)
		req.Close = true // a connection each: a deadline another request moved is not this one's
		if tc.key != "" {
			req.Header.Set("Idempotency-Key", tc.key)
		}
		resp, err := e.httpClient().Do(req)
		if err != nil {
			t.Errorf("%s: the client got no answer (%v), though the turn is recorded", tc.name, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated || !strings.Contains(string(body), "slow answer") {
			t.Errorf("%s: status %d %s, want 201 with the answer", tc.name, resp.StatusCode, body)
		}
	}
}

// panickingTransport panics on every request: a bug in a model call.
type panickingTransport struct{}

func (panickingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	panic("a bug in a model call")
}

// A panic in a model's call (which runs in a goroutine of its own, as does
// a streamed turn) is the turn's 500, logged, not the end of the process:
// the next turn is served. (Sent raw: the harness counts any 500 a defect.)
func TestAPanicInAModelCallIsA500(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t, streamEnvConfig{transport: panickingTransport{}, models: []llm.Model{
		{ID: 1, Name: "buggy", Provider: llm.ProviderOpenAI, BaseURL: "http://127.0.0.1:1/v1", ProviderModel: "m", Timeout: 5 * time.Second, Default: true},
		{ID: 2, Name: "echo", Provider: llm.ProviderEcho, Timeout: 5 * time.Second}}})
	c := e.newClassroom(t, nil)
	turn := func(accept string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, e.srv.URL+runPath(c.class), strings.NewReader(`{"prompt_text":"hi","model_names":["buggy"]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+c.student.Access)
		req.Header.Set("Accept", accept)
		resp, err := e.httpClient().Do(req)
		if err != nil {
			t.Fatalf("the turn (Accept %s): %v", accept, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}
	const internal = `{"detail":"Internal Server Error"}`
	if status, body := turn("application/json"); status != http.StatusInternalServerError || body != internal {
		t.Errorf("the turn as JSON: %d %s, want a 500", status, body)
	}
	// A 500, or, once the stream has begun (its session event), a 500's
	// error event to end it.
	if status, body := turn(eventStream); status != http.StatusInternalServerError &&
		!strings.HasSuffix(strings.TrimSpace(body), "event: error\ndata: "+internal) {
		t.Errorf("the streamed turn: %d %s, want a 500", status, body)
	}
	if !e.logs.contains("a bug in a model call") {
		t.Error("the panic is not in the log")
	}
	_, next := e.startSession(t, c.student.Access, c.class, map[string]any{"prompt_text": "still here", "model_names": []string{"echo"}})
	if next.Results[0].ResponseText != "still here" {
		t.Errorf("the next turn: %+v", next)
	}
}
