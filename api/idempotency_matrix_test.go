package api_test

// The Idempotency-Key matrix: every operation the served document declares
// with an Idempotency-Key header, through the same scenarios (a retry, the
// key with another body, the key from another user, concurrent retries, a
// refused request corrected under its key, the key's bounds). An operation
// that takes the header without a case here fails the test.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"
)

// idemFixture is one idempotent operation's request in a setting of its own
// (fresh users, school, class or session).
type idemFixture struct {
	u       user
	path    string
	body    string   // a request that succeeds
	altBody string   // another request on the same path
	invalid []string // requests refused with 422 that body corrects (at the edge, and in the handler)
	// count is what the operation recorded in this setting (resources, or
	// turns of the session).
	count func(t testing.TB) int64
	// once: body succeeds only once in a setting (an enrollment, a course
	// of one course_key), so a second request without a key conflicts
	// rather than creates.
	once bool
}

type idemCase struct {
	status int // the operation's success status
	setup  func(t *testing.T, e *env) idemFixture
}

func listTotal(e *env, token, path string) func(t testing.TB) int64 {
	return func(t testing.TB) int64 {
		t.Helper()
		res := e.do(t, "GET", path, nil, token)
		wantStatus(t, res, http.StatusOK)
		return num(t, res, "total")
	}
}

// idempotencyMatrix has a case for every operation that takes an
// Idempotency-Key, by operationId.
func idempotencyMatrix() map[string]idemCase {
	return map[string]idemCase{
		"create_agent": {status: http.StatusCreated, setup: func(t *testing.T, e *env) idemFixture {
			u := e.signUp(t)
			return idemFixture{u: u, path: "/agents",
				body:    `{"name":"matrix","system_prompt":"p"}`,
				altBody: `{"name":"another","system_prompt":"p"}`,
				invalid: []string{`{"name":"matrix"}`, `{"name":"   ","system_prompt":"p"}`},
				count:   listTotal(e, u.Access, "/agents")}
		}},
		"create_few_shot_example": {status: http.StatusCreated, setup: func(t *testing.T, e *env) idemFixture {
			u := e.signUp(t)
			return idemFixture{u: u, path: fewShotsPath,
				body:    `{"input_text":"i","output_text":"o"}`,
				altBody: `{"input_text":"j","output_text":"o"}`,
				invalid: []string{`{"input_text":"i"}`, `{"input_text":"   ","output_text":"o"}`},
				count:   listTotal(e, u.Access, fewShotsPath)}
		}},
		"create_course": {status: http.StatusCreated, setup: func(t *testing.T, e *env) idemFixture {
			s := openSchool(t, e)
			return idemFixture{u: s.teacher, path: s.at("/course"),
				body:    `{"title":"A","course_key":"K"}`,
				altBody: `{"title":"B","course_key":"L"}`,
				invalid: []string{`{"title":"A"}`, `{"title":"A","course_key":"K","start_date":"2026-02-01","end_date":"2026-01-01"}`},
				// course_key is unique in the organisation: body succeeds once.
				count: listTotal(e, s.teacher.Access, s.at("/course")), once: true}
		}},
		"create_class": {status: http.StatusCreated, setup: func(t *testing.T, e *env) idemFixture {
			s := openSchool(t, e)
			return idemFixture{u: s.teacher, path: s.at("/classes"),
				body:    `{"name":"P"}`,
				altBody: `{"name":"Q"}`,
				invalid: []string{`{"name":""}`, `{"name":"   "}`},
				count:   listTotal(e, s.teacher.Access, s.at("/classes"))}
		}},
		"enroll_student": {status: http.StatusCreated, setup: func(t *testing.T, e *env) idemFixture {
			s := openSchool(t, e)
			class := num(t, e.createClass(t, s, `{"name":"P"}`), "id")
			student := e.signUp(t)
			return idemFixture{u: s.teacher, path: s.enrollPath(student.ID),
				body:    fmt.Sprintf(`{"class_id":%d,"student_id":%d}`, class, student.ID),
				altBody: fmt.Sprintf(`{"class_id":%d,"student_id":%d,"status":"inactive"}`, class, student.ID),
				invalid: []string{fmt.Sprintf(`{"class_id":%d}`, class),
					fmt.Sprintf(`{"class_id":%d,"student_id":%d}`, class, student.ID+1)},
				count: listTotal(e, student.Access, "/user/class/enrollments"), once: true}
		}},
		"join_class": {status: http.StatusCreated, setup: func(t *testing.T, e *env) idemFixture {
			s := openSchool(t, e)
			code := inviteCodes(t, e.createClass(t, s, `{"name":"P"}`))["student"]["code"].(string)
			student := e.signUp(t)
			return idemFixture{u: student, path: "/user/class/join",
				body:    fmt.Sprintf(`{"code":%q}`, code),
				altBody: `{"code":"NOT-A-CODE"}`,
				invalid: []string{`{"code":""}`, `{}`},
				count:   listTotal(e, student.Access, "/user/class/enrollments"), once: true}
		}},
		"upload_document": {status: http.StatusCreated, setup: func(t *testing.T, e *env) idemFixture {
			u := e.signUp(t)
			// A JSON upload: the handler reads and validates its own body.
			return idemFixture{u: u, path: documentsPath,
				body:    `{"title":"matrix","content":"Mitochondria are the powerhouse of the cell."}`,
				altBody: `{"title":"matrix","content":"Ribosomes make proteins."}`,
				invalid: []string{`{"title":"matrix"}`, `{"title":"   ","content":"Mitochondria are the powerhouse of the cell."}`},
				count:   listTotal(e, u.Access, documentsPath)}
		}},
		"run_practice_session": {status: http.StatusCreated, setup: func(t *testing.T, e *env) idemFixture {
			c := e.newClassroom(t, nil)
			return idemFixture{u: c.student, path: runPath(c.class),
				body:    `{"prompt_text":"once"}`,
				altBody: `{"prompt_text":"twice"}`,
				invalid: []string{`{"prompt_text":""}`, `{"prompt_text":"once","model_names":["no-such-model"]}`},
				count:   listTotal(e, c.student.Access, sessionsPath)}
		}},
		"continue_practice_session": {status: http.StatusOK, setup: func(t *testing.T, e *env) idemFixture {
			c := e.newClassroom(t, nil)
			_, turn := e.startSession(t, c.student.Access, c.class, map[string]any{"prompt_text": "first"})
			stream := fmt.Sprintf("session-%d", turn.SessionID)
			return idemFixture{u: c.student, path: sessionPath(turn.SessionID) + "/chat",
				body:    `{"prompt_text":"again"}`,
				altBody: `{"prompt_text":"other"}`,
				invalid: []string{`{"prompt_text":""}`, `{"prompt_text":"again","model_names":["no-such-model"]}`},
				count: func(t testing.TB) int64 {
					t.Helper()
					var turns int64
					for _, ev := range e.streamEvents(t, stream) {
						if ev.Type == "session.turn_recorded" {
							turns++
						}
					}
					return turns - 1 // the first turn is the setting's
				}}
		}},
	}
}

// idempotentOperations are the operationIds the served document declares
// with an Idempotency-Key header, and each one's maxLength for it.
func idempotentOperations(t *testing.T, e *env) map[string]int {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
			Parameters  []struct {
				Name   string `json:"name"`
				In     string `json:"in"`
				Schema struct {
					MaxLength int `json:"maxLength"`
				} `json:"schema"`
			} `json:"parameters"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(e.doc.raw, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, item := range doc.Paths {
		for _, op := range item {
			for _, p := range op.Parameters {
				if p.In == "header" && strings.EqualFold(p.Name, "Idempotency-Key") {
					out[op.OperationID] = p.Schema.MaxLength
				}
			}
		}
	}
	return out
}

// postKeyed sends f's path with body under key.
func (e *env) postKeyed(t testing.TB, u user, path, body, key string) response {
	t.Helper()
	return e.do(t, "POST", path, body, u.Access, "Idempotency-Key", key)
}

// wantReplay checks that again is first replayed: the same status and body,
// marked, with the headers a client acts on unchanged.
func wantReplay(t testing.TB, first, again response) {
	t.Helper()
	if again.Status != first.Status || string(again.Body) != string(first.Body) {
		t.Errorf("the replay %s differs from the first answer %s", again, first)
	}
	wantHeader(t, again, "Idempotent-Replayed", "true")
	for _, h := range []string{"Content-Type", "Location", "X-Event-Position", "X-Projection-Pending"} {
		if got, want := again.Header.Get(h), first.Header.Get(h); got != want {
			t.Errorf("%s: the replay's %s is %q, the first answer's %q", again, h, got, want)
		}
	}
}

// wantFresh checks that res is an answer of its own: successful, not a replay.
func wantFresh(t testing.TB, res response, status int) {
	t.Helper()
	wantStatus(t, res, status)
	wantHeader(t, res, "Idempotent-Replayed", "")
	if res.Header.Get("X-Event-Position") == "" {
		t.Errorf("%s: a write without X-Event-Position", res)
	}
}

// wantKeyRefused checks a 422 at the Idempotency-Key header of the given type.
func wantKeyRefused(t testing.TB, res response, typ string) {
	t.Helper()
	wantStatus(t, res, http.StatusUnprocessableEntity)
	items, _ := field(t, res, "detail").([]any)
	if len(items) != 1 {
		t.Fatalf("%s: want one error", res)
	}
	item, _ := items[0].(map[string]any)
	loc, _ := item["loc"].([]any)
	if len(loc) != 2 || loc[0] != "header" || !strings.EqualFold(fmt.Sprint(loc[1]), "Idempotency-Key") || (typ != "" && item["type"] != typ) {
		t.Errorf("%s: want a %s error at the Idempotency-Key header", res, typ)
	}
}

func wantCount(t testing.TB, f idemFixture, want int64) {
	t.Helper()
	if n := f.count(t); n != want {
		t.Errorf("%s: %d recorded, want %d", f.path, n, want)
	}
}

const inProgress = "A request with this Idempotency-Key is still in progress"

func TestIdempotencyMatrix(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	matrix := idempotencyMatrix()
	declared := idempotentOperations(t, e)
	if len(declared) == 0 {
		t.Fatal("the document declares no Idempotency-Key header")
	}
	for op, maxLen := range declared {
		if _, ok := matrix[op]; !ok {
			t.Errorf("%s takes an Idempotency-Key, and the matrix has no case for it", op)
		}
		// docs/decisions.md, docs/security.md: up to 255 characters.
		if maxLen != 255 {
			t.Errorf("%s declares Idempotency-Key with maxLength %d, the docs say 255", op, maxLen)
		}
	}
	// What idempotently answers besides the operation's own answers: 422
	// at the header (a key too long, or used with another request) and
	// 409 while the key's first request is in progress
	// (docs/decisions.md). The document must declare both.
	for _, item := range e.doc.Paths {
		for _, op := range item {
			if _, ok := declared[op.OperationID]; !ok {
				continue
			}
			for _, status := range []string{"409", "422"} {
				if _, ok := op.Responses[status]; !ok {
					t.Errorf("%s takes an Idempotency-Key, and its document lacks the %s a key answers", op.OperationID, status)
				}
			}
		}
	}
	ops := make([]string, 0, len(matrix))
	for op := range matrix {
		if _, ok := declared[op]; !ok {
			t.Errorf("the matrix has a case for %s, which takes no Idempotency-Key", op)
		}
		ops = append(ops, op)
	}
	slices.Sort(ops)

	for _, op := range ops {
		c := matrix[op]
		t.Run(op, func(t *testing.T) {
			t.Parallel()

			t.Run("the same request twice", func(t *testing.T) {
				f := c.setup(t, e)
				key := uuid.NewString()
				first := e.postKeyed(t, f.u, f.path, f.body, key)
				wantFresh(t, first, c.status)
				again := e.postKeyed(t, f.u, f.path, f.body, key)
				wantReplay(t, first, again)
				wantCount(t, f, 1)
			})

			t.Run("the same key with another body", func(t *testing.T) {
				f := c.setup(t, e)
				key := uuid.NewString()
				first := e.postKeyed(t, f.u, f.path, f.body, key)
				wantFresh(t, first, c.status)
				res := e.postKeyed(t, f.u, f.path, f.altBody, key)
				wantBody(t, res, http.StatusUnprocessableEntity, `{"detail":[{"type":"value_error","loc":["header","Idempotency-Key"],`+
					`"msg":"Value error, Idempotency-Key was already used with a different request","input":"`+key+`",`+
					`"ctx":{"error":"Idempotency-Key was already used with a different request"}}]}`)
				// The key on another operation is another request too.
				otherPath, otherBody := "/agents", `{"name":"matrix","system_prompt":"p"}`
				if f.path == otherPath {
					otherPath, otherBody = fewShotsPath, `{"input_text":"i","output_text":"o"}`
				}
				wantKeyRefused(t, e.postKeyed(t, f.u, otherPath, otherBody, key), "value_error")
				wantCount(t, f, 1)
				wantReplay(t, first, e.postKeyed(t, f.u, f.path, f.body, key))
			})

			t.Run("the same key from another user", func(t *testing.T) {
				f, own, same := c.setup(t, e), c.setup(t, e), c.setup(t, e)
				key := uuid.NewString()
				first := e.postKeyed(t, f.u, f.path, f.body, key)
				wantFresh(t, first, c.status)

				// Another user, in a setting of their own, under the key.
				res := e.postKeyed(t, own.u, own.path, own.body, key)
				wantFresh(t, res, c.status)
				if string(res.Body) == string(first.Body) {
					t.Errorf("%s: another user got the first user's answer", res)
				}
				wantCount(t, own, 1)

				// Another user sending the first user's very request.
				res = e.postKeyed(t, same.u, f.path, f.body, key)
				wantHeader(t, res, "Idempotent-Replayed", "")
				if string(res.Body) == string(first.Body) {
					t.Errorf("%s: another user got the first user's answer", res)
				}
				if res.Status == c.status && f.path == same.path {
					wantCount(t, same, 1)
				}
				t.Logf("another user's copy of the request: %d", res.Status)

				wantCount(t, f, 1)
				wantReplay(t, first, e.postKeyed(t, f.u, f.path, f.body, key))
			})

			t.Run("concurrent requests with one key", func(t *testing.T) {
				f := c.setup(t, e)
				key := uuid.NewString()
				results := concurrently(5, func(int) response { return e.postKeyed(t, f.u, f.path, f.body, key) })
				var answered []response
				for _, res := range results {
					switch {
					case res.Status == c.status:
						if res.Header.Get("Idempotent-Replayed") == "" {
							answered = append(answered, res)
						}
					case res.Status == http.StatusConflict:
						wantDetail(t, res, http.StatusConflict, inProgress)
					default:
						t.Errorf("%s: want %d or 409 (in progress)", res, c.status)
					}
				}
				if len(answered) != 1 {
					t.Fatalf("%d of 5 concurrent requests under one key ran (%v), want 1", len(answered), results)
				}
				for _, res := range results {
					if res.Status == c.status && res.Header.Get("Idempotent-Replayed") != "" {
						wantReplay(t, answered[0], res)
					}
				}
				wantCount(t, f, 1)
				wantReplay(t, answered[0], e.postKeyed(t, f.u, f.path, f.body, key))
				t.Logf("statuses: %v", statuses(results))
			})

			t.Run("concurrent retries of a request whose answer was lost", func(t *testing.T) {
				// The process died after the append: the key is left in
				// progress, its lease lapsed. Five retries at once: one
				// takes the key over and finds what the first appended.
				f := c.setup(t, e)
				key := uuid.NewString()
				first := e.postKeyed(t, f.u, f.path, f.body, key)
				wantFresh(t, first, c.status)
				if _, err := e.pool.Exec(context.Background(), `UPDATE idempotency_keys SET status = 0, headers = '{}', body = '',
					lease_until = now() - interval '1 second' WHERE user_id = $1 AND key = $2`, f.u.ID, key); err != nil {
					t.Fatal(err)
				}
				results := concurrently(5, func(int) response { return e.postKeyed(t, f.u, f.path, f.body, key) })
				for _, res := range results {
					switch res.Status {
					case c.status:
						if string(res.Body) != string(first.Body) || res.Header.Get("X-Event-Position") != first.Header.Get("X-Event-Position") ||
							res.Header.Get("Location") != first.Header.Get("Location") {
							t.Errorf("%s (at %s): want the first answer %s (at %s)", res, res.Header.Get("X-Event-Position"),
								first, first.Header.Get("X-Event-Position"))
						}
					case http.StatusConflict:
						wantDetail(t, res, http.StatusConflict, inProgress)
					default:
						t.Errorf("%s: want %d or 409 (in progress)", res, c.status)
					}
				}
				wantCount(t, f, 1)
				t.Logf("statuses: %v", statuses(results))
			})

			t.Run("a refused request corrected under its key", func(t *testing.T) {
				// decisions.md: failed requests are not remembered; the
				// corrected request is another request, run once.
				for i, bad := range matrixBodies(c.setup, t, e) {
					t.Run(fmt.Sprint(i), func(t *testing.T) {
						f := bad.f
						key := uuid.NewString()
						refused := e.postKeyed(t, f.u, f.path, bad.body, key)
						wantStatus(t, refused, http.StatusUnprocessableEntity)
						wantHeader(t, refused, "Idempotent-Replayed", "")
						if strings.Contains(string(refused.Body), `"header"`) {
							t.Errorf("%s: the refusal names the header", refused)
						}
						wantCount(t, f, 0)
						first := e.postKeyed(t, f.u, f.path, f.body, key)
						wantFresh(t, first, c.status)
						wantReplay(t, first, e.postKeyed(t, f.u, f.path, f.body, key))
						wantCount(t, f, 1)
					})
				}
			})

			t.Run("keys", func(t *testing.T) {
				accepted := map[string]string{
					"255 characters":           strings.Repeat("k", 255),
					"255 non-ASCII characters": strings.Repeat("é", 200) + strings.Repeat("😀", 55),
					"non-ASCII":                "clé-ключ-鍵-😀",
				}
				for name, key := range accepted {
					t.Run(name, func(t *testing.T) {
						if n := utf8.RuneCountInString(key); n > 255 {
							t.Fatalf("the key has %d characters", n)
						}
						f := c.setup(t, e)
						first := e.postKeyed(t, f.u, f.path, f.body, key)
						wantFresh(t, first, c.status)
						wantReplay(t, first, e.postKeyed(t, f.u, f.path, f.body, key))
						wantCount(t, f, 1)
					})
				}
				refused := map[string]struct{ key, typ string }{
					"256 characters":           {strings.Repeat("k", 256), "string_too_long"},
					"256 non-ASCII characters": {strings.Repeat("😀", 256), "string_too_long"},
					"not UTF-8":                {"k\xffk", ""},
				}
				for name, r := range refused {
					t.Run(name, func(t *testing.T) {
						f := c.setup(t, e)
						wantKeyRefused(t, e.postKeyed(t, f.u, f.path, f.body, r.key), r.typ)
						wantCount(t, f, 0)
					})
				}
				t.Run("empty", func(t *testing.T) {
					// An empty header is no key: each request runs, as
					// without the header.
					f := c.setup(t, e)
					first := e.postKeyed(t, f.u, f.path, f.body, "")
					wantFresh(t, first, c.status)
					again := e.postKeyed(t, f.u, f.path, f.body, "")
					wantHeader(t, again, "Idempotent-Replayed", "")
					if f.once {
						wantStatus(t, again, http.StatusConflict)
						wantCount(t, f, 1)
						return
					}
					wantFresh(t, again, c.status)
					if string(again.Body) == string(first.Body) {
						t.Errorf("%s: two requests without a key answered alike", again)
					}
					wantCount(t, f, 2)
				})
			})
		})
	}
}

type badBody struct {
	f    idemFixture
	body string
}

// matrixBodies are an operation's refused requests, each in a setting of
// its own.
func matrixBodies(setup func(*testing.T, *env) idemFixture, t *testing.T, e *env) []badBody {
	t.Helper()
	f := setup(t, e)
	out := []badBody{{f, f.invalid[0]}}
	for i := 1; i < len(f.invalid); i++ {
		g := setup(t, e)
		out = append(out, badBody{g, g.invalid[i]})
	}
	return out
}

// statuses are the answers' statuses, a replay marked "r".
func statuses(results []response) []string {
	out := make([]string, len(results))
	for i, res := range results {
		out[i] = fmt.Sprint(res.Status)
		if res.Header.Get("Idempotent-Replayed") != "" {
			out[i] += "r"
		}
	}
	return out
}
