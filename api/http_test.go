package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"lectern/aggregates"
	"lectern/commands"
	"lectern/events"
	"lectern/eventstore"
	"lectern/eventstore/postgres"
)

func TestBodyTooLarge(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	big := `{"name":"a","system_prompt":"` + strings.Repeat("x", 1<<20) + `"}`

	t.Run("with Content-Length", func(t *testing.T) {
		res := e.do(t, "POST", "/agents", big, u.Access)
		wantDetail(t, res, http.StatusRequestEntityTooLarge, "Request body too large")
	})
	t.Run("chunked", func(t *testing.T) {
		res := e.do(t, "POST", "/agents", bytes.NewReader([]byte(big)), u.Access)
		wantDetail(t, res, http.StatusRequestEntityTooLarge, "Request body too large")
	})
	t.Run("on an operation without a token", func(t *testing.T) {
		res := e.do(t, "POST", "/user/login", big, "")
		wantDetail(t, res, http.StatusRequestEntityTooLarge, "Request body too large")
	})
	wantBody(t, e.do(t, "GET", "/agents", nil, u.Access), http.StatusOK, `{"items":[],"total":0,"page":1,"size":50}`)
}

func TestUnknownRoute(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	for _, tc := range []struct{ method, path string }{
		{"GET", "/nope"},
		{"GET", "/agents/1/extra"},
		{"POST", "/user/nope"},
		{"GET", "/user"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			wantDetail(t, e.do(t, tc.method, tc.path, nil, u.Access), http.StatusNotFound, "Not Found")
		})
	}
}

func TestWrongMethod(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	for _, tc := range []struct {
		method, path string
		allow        []string
	}{
		{"DELETE", "/agents", []string{"GET", "HEAD", "POST"}},
		{"PUT", "/agents/1", []string{"GET", "HEAD", "PATCH"}},
		{"GET", "/user/login", []string{"POST"}},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			res := e.do(t, tc.method, tc.path, nil, u.Access)
			wantDetail(t, res, http.StatusMethodNotAllowed, "Method Not Allowed")

			// RFC 9110 §15.5.6: a 405 MUST list the allowed methods (Starlette does).
			var allow []string
			for _, v := range res.Header.Values("Allow") {
				for _, m := range strings.Split(v, ",") {
					if m = strings.TrimSpace(m); m != "" {
						allow = append(allow, m)
					}
				}
			}
			slices.Sort(allow)
			if !slices.Equal(allow, tc.allow) {
				t.Errorf("%s: Allow is %q, want %q", res, res.Header.Values("Allow"), strings.Join(tc.allow, ", "))
			}
		})
	}
}

// HEAD is answered wherever GET is, as GET is, without the body (RFC
// 9110 §9.3.2: a general-purpose server must support it).
func TestHeadAnswersAsGet(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	owner, other := e.signUp(t), e.signUp(t)
	agent := agentPath(e.createAgent(t, owner.Access, map[string]any{"name": "Tutor", "system_prompt": "Be kind"}), t)
	for _, tc := range []struct {
		name, path, token string
		want              int
	}{
		{"a list", "/agents", owner.Access, http.StatusOK},
		{"an agent", agent, owner.Access, http.StatusOK},
		{"another user's agent", agent, other.Access, http.StatusNotFound},
		{"no token", "/agents", "", http.StatusUnauthorized},
		{"the caller", "/user/me", owner.Access, http.StatusOK},
		{"health", "/healthz", "", http.StatusOK},
		{"the document", "/openapi.json", "", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			get := e.send(t, "GET", tc.path, nil, tc.token)
			head := e.send(t, "HEAD", tc.path, nil, tc.token)
			wantStatus(t, get, tc.want)
			wantStatus(t, head, tc.want)
			if len(head.Body) != 0 {
				t.Errorf("%s: a body of %d bytes", head, len(head.Body))
			}
			wantHeader(t, head, "Content-Type", get.Header.Get("Content-Type"))
		})
	}
	// Where there is no GET there is no HEAD.
	res := e.send(t, "HEAD", "/user/login", nil, "")
	wantStatus(t, res, http.StatusMethodNotAllowed)
	wantHeader(t, res, "Allow", "POST")
}

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func TestRequestID(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)

	res := e.do(t, "GET", "/user/me", nil, "", "X-Request-ID", "trace-42.a:b_c")
	wantHeader(t, res, "X-Request-ID", "trace-42.a:b_c")

	first := e.do(t, "GET", "/user/me", nil, "").Header.Get("X-Request-ID")
	second := e.do(t, "GET", "/user/me", nil, "").Header.Get("X-Request-ID")
	if !uuidPattern.MatchString(first) || !uuidPattern.MatchString(second) || first == second {
		t.Errorf("generated request ids %q and %q: want two different UUIDs", first, second)
	}

	// A value unfit for a log line is replaced.
	for _, unsafe := range []string{"two words", strings.Repeat("a", 129), `"quoted"`} {
		got := e.do(t, "GET", "/user/me", nil, "", "X-Request-ID", unsafe).Header.Get("X-Request-ID")
		if !uuidPattern.MatchString(got) {
			t.Errorf("X-Request-ID %q came back as %q, want a generated UUID", unsafe, got)
		}
	}

	// Errors carry it too.
	res = e.do(t, "GET", "/nope", nil, "", "X-Request-ID", "not-found-1")
	wantHeader(t, res, "X-Request-ID", "not-found-1")
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u, other := e.signUp(t), e.signUp(t)
	key := uuid.NewString()
	body := `{"name":"once","system_prompt":"p"}`

	first := e.do(t, "POST", "/agents", body, u.Access, "Idempotency-Key", key)
	wantStatus(t, first, http.StatusCreated)
	if got := first.Header.Get("Idempotent-Replayed"); got != "" {
		t.Errorf("%s: the first request has Idempotent-Replayed %q", first, got)
	}
	second := e.do(t, "POST", "/agents", body, u.Access, "Idempotency-Key", key)
	wantBody(t, second, http.StatusCreated, string(first.Body))
	wantHeader(t, second, "Idempotent-Replayed", "true")
	wantHeader(t, second, "X-Event-Position", first.Header.Get("X-Event-Position"))

	list := e.do(t, "GET", "/agents", nil, u.Access)
	wantBody(t, list, http.StatusOK, `{"items":[`+string(first.Body)+`],"total":1,"page":1,"size":50}`)

	t.Run("the same key with another body", func(t *testing.T) {
		res := e.do(t, "POST", "/agents", `{"name":"twice","system_prompt":"p"}`, u.Access, "Idempotency-Key", key)
		wantStatus(t, res, http.StatusUnprocessableEntity)
		wantBody(t, res, http.StatusUnprocessableEntity, `{"detail":[{"type":"value_error","loc":["header","Idempotency-Key"],`+
			`"msg":"Value error, Idempotency-Key was already used with a different request","input":"`+key+`",`+
			`"ctx":{"error":"Idempotency-Key was already used with a different request"}}]}`)
	})
	t.Run("another user's key is theirs", func(t *testing.T) {
		res := e.do(t, "POST", "/agents", body, other.Access, "Idempotency-Key", key)
		wantStatus(t, res, http.StatusCreated)
		wantHeader(t, res, "Idempotent-Replayed", "")
		if num(t, res, "agent_id") == num(t, first, "agent_id") {
			t.Errorf("%s: another user got the first user's agent", res)
		}
	})
	t.Run("without a key, every POST creates", func(t *testing.T) {
		a := e.do(t, "POST", "/agents", body, other.Access)
		b := e.do(t, "POST", "/agents", body, other.Access)
		wantStatus(t, a, http.StatusCreated)
		wantStatus(t, b, http.StatusCreated)
		if num(t, a, "agent_id") == num(t, b, "agent_id") {
			t.Errorf("two POSTs without a key made one agent")
		}
	})
	t.Run("a key over 255 characters", func(t *testing.T) {
		// The document declares the header with maxLength 255: a validation error.
		long := strings.Repeat("k", 256)
		res := e.do(t, "POST", "/agents", body, u.Access, "Idempotency-Key", long)
		wantStatus(t, res, http.StatusUnprocessableEntity)
		items, _ := field(t, res, "detail").([]any)
		if len(items) != 1 {
			t.Fatalf("%s: want one error", res)
		}
		item, _ := items[0].(map[string]any)
		loc, _ := item["loc"].([]any)
		if item["type"] != "string_too_long" || len(loc) != 2 || loc[0] != "header" || !strings.EqualFold(loc[1].(string), "idempotency-key") {
			t.Errorf("%s: want a string_too_long error at the Idempotency-Key header", res)
		}
	})
}

func TestMinPosition(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	created := e.createAgent(t, u.Access, `{"name":"a","system_prompt":"p"}`)
	pos := created.Header.Get("X-Event-Position")
	if pos == "" {
		t.Fatalf("%s: no X-Event-Position", created)
	}

	res := e.do(t, "GET", "/agents", nil, u.Access, "X-Min-Position", pos)
	wantBody(t, res, http.StatusOK, `{"items":[`+string(created.Body)+`],"total":1,"page":1,"size":50}`)
	wantHeader(t, res, "X-Projection-Pending", "")
	res = e.do(t, "GET", agentPath(created, t), nil, u.Access, "X-Min-Position", pos)
	wantBody(t, res, http.StatusOK, string(created.Body))

	for _, bad := range []string{"yesterday", "12", "1-x", "-1-2"} {
		t.Run(bad, func(t *testing.T) {
			res := e.do(t, "GET", "/agents", nil, u.Access, "X-Min-Position", bad)
			wantDetail(t, res, http.StatusBadRequest, "Invalid X-Min-Position header")
		})
	}
}

func TestHealth(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	wantBody(t, e.do(t, "GET", "/healthz", nil, ""), http.StatusOK, `{"status":"ok"}`)
	wantBody(t, e.do(t, "GET", "/readyz", nil, ""), http.StatusOK, `{"status":"ready"}`)
}

// A key whose request died with its process (kill -9 mid-request) holds it
// only for its lease: a retry within the lease is 409, after it the retry
// runs, once.
func TestIdempotencyKeyAfterACrash(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	body := `{"name":"after a crash","system_prompt":"p"}`
	sum := sha256.Sum256([]byte(body))
	crashed := func(key, lease string) {
		t.Helper()
		// The row a request leaves when its process dies mid-way.
		if _, err := e.pool.Exec(context.Background(), `INSERT INTO idempotency_keys (user_id, key, request, status, headers, body, lease_until)
			VALUES ($1, $2, $3, 0, '{}', '', now() + $4::interval)`, u.ID, key, "POST /agents "+hex.EncodeToString(sum[:]), lease); err != nil {
			t.Fatal(err)
		}
	}
	held, lapsed := uuid.NewString(), uuid.NewString()
	crashed(held, "1 hour")
	crashed(lapsed, "-1 second")

	wantDetail(t, e.do(t, "POST", "/agents", body, u.Access, "Idempotency-Key", held), http.StatusConflict,
		"A request with this Idempotency-Key is still in progress")
	first := e.do(t, "POST", "/agents", body, u.Access, "Idempotency-Key", lapsed)
	wantStatus(t, first, http.StatusCreated)
	again := e.do(t, "POST", "/agents", body, u.Access, "Idempotency-Key", lapsed)
	wantBody(t, again, http.StatusCreated, string(first.Body))
	wantHeader(t, again, "Idempotent-Replayed", "true")
	if total := num(t, e.do(t, "GET", "/agents", nil, u.Access), "total"); total != 1 {
		t.Errorf("%d agents after the retries, want 1", total)
	}
}

// A request that died after its append (kill -9 between the append and the
// answer) is completed once by its retry: the retry finds the agent the dead
// attempt created and answers with it, as the first would have.
func TestIdempotencyKeyAfterACrashThatAppended(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	ctx := context.Background()
	key := uuid.NewString()
	body := `{"name":"appended, then died","system_prompt":"p"}`
	sum := sha256.Sum256([]byte(body))

	// The dead request: it took the key and ran its command under it, as
	// api.idempotently does, in a process of its own (its own id sequences).
	var since time.Time
	if err := e.pool.QueryRow(ctx, `INSERT INTO idempotency_keys (user_id, key, request, status, headers, body, lease_until)
		VALUES ($1, $2, $3, 0, '{}', '', now() + interval '6 seconds') RETURNING created_at`,
		u.ID, key, "POST /agents "+hex.EncodeToString(sum[:])).Scan(&since); err != nil {
		t.Fatal(err)
	}
	store := e.events(t)
	if pg, ok := store.(*postgres.Store); ok {
		t.Cleanup(pg.Close)
	}
	dead, err := commands.NewAgents(commands.Deps{Store: store, Registry: events.NewRegistry(), DB: e.pool,
		Now: time.Now, IDs: commands.NewSequences(e.pool)})
	if err != nil {
		t.Fatal(err)
	}
	deadCtx := commands.WithIdempotency(commands.WithMetadata(ctx, eventstore.Metadata{UserID: u.ID, RequestID: "dead"}), u.ID, key, since)
	agent, appended, err := dead.Create(deadCtx, aggregates.CreateAgent{OwnerID: u.ID, Name: "appended, then died", SystemPrompt: "p"})
	if err != nil {
		t.Fatal(err)
	}
	// It died: its lease lapses.
	if _, err := e.pool.Exec(ctx, `UPDATE idempotency_keys SET lease_until = now() - interval '1 second' WHERE user_id = $1 AND key = $2`, u.ID, key); err != nil {
		t.Fatal(err)
	}

	retry := e.do(t, "POST", "/agents", body, u.Access, "Idempotency-Key", key)
	wantStatus(t, retry, http.StatusCreated)
	wantHeader(t, retry, "Idempotent-Replayed", "")
	wantHeader(t, retry, "X-Event-Position", appended.Position.String())
	if id := num(t, retry, "agent_id"); id != agent.ID {
		t.Errorf("%s: the retry answered agent %d, the dead request created %d", retry, id, agent.ID)
	}
	created, err := time.Parse(time.RFC3339Nano, field(t, retry, "created_at").(string))
	if err != nil || !created.Equal(agent.CreatedAt) {
		t.Errorf("%s: created_at %v (%v), the dead request's agent was created at %v", retry, created, err, agent.CreatedAt)
	}
	// The answer is the agent as stored, and the only one.
	wantBody(t, e.do(t, "GET", agentPath(retry, t), nil, u.Access), http.StatusOK, string(retry.Body))
	wantBody(t, e.do(t, "GET", "/agents", nil, u.Access), http.StatusOK, `{"items":[`+string(retry.Body)+`],"total":1,"page":1,"size":50}`)
	recorded, err := store.ReadStream(ctx, eventstore.StreamName(events.CategoryAgent, agent.ID), eventstore.Forwards, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recorded) != 1 || recorded[0].Type != "agent.created" {
		t.Errorf("the agent's stream holds %d events (%+v), want its one agent.created", len(recorded), recorded)
	}

	// Now answered, the key replays the answer.
	again := e.do(t, "POST", "/agents", body, u.Access, "Idempotency-Key", key)
	wantBody(t, again, http.StatusCreated, string(retry.Body))
	wantHeader(t, again, "Idempotent-Replayed", "true")
}

// Every route that honours Idempotency-Key completes once when its answer
// was lost with its process: with the request's events appended and its key
// left in progress, a retry after the lease answers as the first did, and
// records nothing more (its claims and ids are the first's).
func TestIdempotencyKeyAfterALostAnswer(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	retried := func(t *testing.T, u user, path string, body any, status int) response {
		t.Helper()
		key := uuid.NewString()
		first := e.do(t, "POST", path, body, u.Access, "Idempotency-Key", key)
		wantStatus(t, first, status)
		// The process died after the append: the key is left in progress,
		// its lease lapsed.
		if _, err := e.pool.Exec(context.Background(), `UPDATE idempotency_keys SET status = 0, headers = '{}', body = '',
			lease_until = now() - interval '1 second' WHERE user_id = $1 AND key = $2`, u.ID, key); err != nil {
			t.Fatal(err)
		}
		again := e.do(t, "POST", path, body, u.Access, "Idempotency-Key", key)
		wantBody(t, again, status, string(first.Body))
		wantHeader(t, again, "Idempotent-Replayed", "")
		wantHeader(t, again, "X-Event-Position", first.Header.Get("X-Event-Position"))
		return first
	}
	total := func(t *testing.T, u user, path string) int64 {
		t.Helper()
		return num(t, e.do(t, "GET", path, nil, u.Access), "total")
	}

	t.Run("course", func(t *testing.T) {
		s := openSchool(t, e)
		retried(t, s.teacher, s.at("/course"), `{"title":"A","course_key":"K"}`, http.StatusCreated)
		if n := total(t, s.teacher, s.at("/course")); n != 1 {
			t.Errorf("%d courses, want 1", n)
		}
	})
	t.Run("class", func(t *testing.T) {
		s := openSchool(t, e)
		class := num(t, retried(t, s.teacher, s.at("/classes"), `{"name":"P"}`, http.StatusCreated), "id")
		if n := total(t, s.teacher, s.at("/classes")); n != 1 {
			t.Errorf("%d classes, want 1", n)
		}
		// The codes the retry drew were given back.
		var claimed int
		if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM unique_claims WHERE scope = 'invite_code' AND owner = $1`,
			fmt.Sprintf("class-%d", class)).Scan(&claimed); err != nil || claimed != 2 {
			t.Errorf("the class holds %d invite code claims (%v), want its 2", claimed, err)
		}
	})
	t.Run("enrollment", func(t *testing.T) {
		s := openSchool(t, e)
		class := num(t, e.createClass(t, s, `{"name":"P","capacity":1}`), "id")
		student := e.signUp(t)
		retried(t, s.teacher, s.enrollPath(student.ID), map[string]any{"class_id": class, "student_id": student.ID}, http.StatusCreated)
		if n := total(t, student, "/user/class/enrollments"); n != 1 {
			t.Errorf("%d enrollments, want 1", n)
		}
	})
	t.Run("join", func(t *testing.T) {
		s := openSchool(t, e)
		created := e.createClass(t, s, `{"name":"P","capacity":1}`)
		class := num(t, created, "id")
		student := e.signUp(t)
		// The first use leaves the code used up: the retry must not refuse it.
		retried(t, student, "/user/class/join", map[string]any{"code": inviteCodes(t, created)["student"]["code"]}, http.StatusCreated)
		if n := total(t, student, "/user/class/enrollments"); n != 1 {
			t.Errorf("%d enrollments, want 1", n)
		}
		used := 0
		for _, ev := range e.streamEvents(t, fmt.Sprintf("class-%d", class)) {
			if ev.Type == "class.invite_code_used" {
				used++
			}
		}
		if used != 1 {
			t.Errorf("the code was used %d times, want once", used)
		}
	})
	t.Run("few-shot example", func(t *testing.T) {
		u := e.signUp(t)
		retried(t, u, fewShotsPath, `{"input_text":"i","output_text":"o"}`, http.StatusCreated)
		if n := total(t, u, fewShotsPath); n != 1 {
			t.Errorf("%d examples, want 1", n)
		}
	})
	t.Run("session and turn", func(t *testing.T) {
		c := e.newClassroom(t, nil)
		first := decodeTurn(t, retried(t, c.student, runPath(c.class), map[string]any{"prompt_text": "once"}, http.StatusCreated))
		if n := total(t, c.student, sessionsPath); n != 1 {
			t.Errorf("%d sessions, want 1", n)
		}
		retried(t, c.student, sessionPath(first.SessionID)+"/chat", map[string]any{"prompt_text": "twice"}, http.StatusOK)
		got := eventTypes(e.streamEvents(t, fmt.Sprintf("session-%d", first.SessionID)))
		if want := []string{"session.started", "session.turn_recorded", "session.turn_recorded"}; !slices.Equal(got, want) {
			t.Errorf("the session's events are %q, want %q", got, want)
		}
	})
}
