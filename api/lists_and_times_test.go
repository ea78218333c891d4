package api_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// The event history's until excludes every event recorded at or after it:
// until at the first instant of year 1 (Go's zero time) selects nothing,
// and since equal to it is "until not after since" (docs/decisions.md).
func TestEventsUntilTheFirstInstant(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	admin := asAdmin(t, e)
	e.signUp(t)
	eventsEventually(t, e, "/admin/events?limit=1", admin.Access, 1)
	for _, until := range []string{"0001-01-01T00:00:00Z", "0001-01-01", "0001-01-01T01:00:00+01:00"} {
		wantBody(t, e.do(t, "GET", "/admin/events?until="+url.QueryEscape(until), nil, admin.Access), http.StatusOK,
			`{"items":[],"next":null}`)
	}
	wantBody(t, e.do(t, "GET", "/admin/events?since=0001-01-01T00:00:00Z&until=0001-01-01T00:00:00Z", nil, admin.Access),
		http.StatusUnprocessableEntity,
		`{"detail":[{"type":"value_error","loc":["query","until"],"msg":"Value error, until must be after since","input":"0001-01-01T00:00:00Z","ctx":{"error":"until must be after since"}}]}`)
	// since at that instant selects every event, as no since does.
	res := e.do(t, "GET", "/admin/events?since=0001-01-01T00:00:00Z&limit=1", nil, admin.Access)
	if len(eventItems(t, res)) != 1 {
		t.Errorf("%s: want the first event", res)
	}
}

// A date-time of year 0 is no date-time (pydantic: datetime_parsing, "year 0
// is out of range"), in a query as in a body, whatever its offset.
func TestDateTimeOfYearZero(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s := openSchool(t, e)
	item := func(loc, input string) string {
		return fmt.Sprintf(`{"detail":[{"type":"datetime_parsing","loc":%s,"msg":"Input should be a valid datetime, year 0 is out of range","input":%q,"ctx":{"error":"year 0 is out of range"}}]}`, loc, input)
	}
	for _, v := range []string{"0000-01-01T00:00:00Z", "0000-12-31T23:00:00-01:00", "0000-06-01"} {
		wantBody(t, e.do(t, "GET", "/admin/events?since="+url.QueryEscape(v), nil, s.admin.Access), http.StatusUnprocessableEntity,
			item(`["query","since"]`, v))
		wantBody(t, e.do(t, "GET", "/admin/events?until="+url.QueryEscape(v), nil, s.admin.Access), http.StatusUnprocessableEntity,
			item(`["query","until"]`, v))
		wantBody(t, e.do(t, "POST", s.at("/classes"), map[string]any{"name": "n", "end_at": v}, s.teacher.Access),
			http.StatusUnprocessableEntity, item(`["body","end_at"]`, v))
	}
	class := num(t, e.createClass(t, s, `{"name":"P"}`), "id")
	student := e.signUp(t)
	wantBody(t, e.do(t, "PATCH", s.at("/classes/%d", class), `{"start_at":"0000-02-29T12:00:00+05:00"}`, s.teacher.Access),
		http.StatusUnprocessableEntity, item(`["body","start_at"]`, "0000-02-29T12:00:00+05:00"))
	wantBody(t, e.do(t, "POST", s.enrollPath(student.ID), map[string]any{"class_id": class, "student_id": student.ID,
		"enrolled_at": "0000-01-01T00:00:00z"}, s.teacher.Access), http.StatusUnprocessableEntity,
		item(`["body","enrolled_at"]`, "0000-01-01T00:00:00z"))
}

// An error item's input is the value as the request carried it, as for
// every other field error, not the service's normalised form of it (UTC,
// upper-case T, a date-only value taken as midnight).
func TestTimeErrorsEchoTheInputAsSent(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s := openSchool(t, e)
	valueError := func(loc, input, msg string) string {
		return fmt.Sprintf(`{"detail":[{"type":"value_error","loc":%s,"msg":"Value error, %s","input":%q,"ctx":{"error":%q}}]}`, loc, msg, input, msg)
	}
	for _, tc := range []struct{ query, input string }{
		{"since=2020-01-01T00:00:00Z&until=" + url.QueryEscape("2020-01-01t00:00:00+01:00"), "2020-01-01t00:00:00+01:00"},
		{"since=2020-01-02&until=2020-01-01", "2020-01-01"},
		{"since=2020-01-02&until=2020-01-01&until=" + url.QueryEscape("2020-01-01 10:00:00.5"), "2020-01-01 10:00:00.5"},
	} {
		wantBody(t, e.do(t, "GET", "/admin/events?"+tc.query, nil, s.admin.Access), http.StatusUnprocessableEntity,
			valueError(`["query","until"]`, tc.input, "until must be after since"))
	}
	wantBody(t, e.do(t, "POST", s.at("/classes"), `{"name":"n","end_at":"9999-12-31t23:00:00-0500"}`, s.teacher.Access),
		http.StatusUnprocessableEntity, valueError(`["body","end_at"]`, "9999-12-31t23:00:00-0500", "the date-time is out of range once in UTC"))
	wantBody(t, e.do(t, "POST", s.at("/classes"), `{"name":"n","start_at":"2026-02-01T10:00:00+01:00","end_at":"2026-02-01T09:30:00+01:00"}`, s.teacher.Access),
		http.StatusUnprocessableEntity, valueError(`["body","end_at"]`, "2026-02-01T09:30:00+01:00", "end_at must not be before start_at"))
	class := e.createClass(t, s, `{"name":"P","start_at":"2026-02-01T10:00:00Z"}`)
	wantBody(t, e.do(t, "PATCH", s.at("/classes/%d", num(t, class, "id")), `{"end_at":"2026-02-01"}`, s.teacher.Access),
		http.StatusUnprocessableEntity, valueError(`["body","end_at"]`, "2026-02-01", "end_at must not be before start_at"))
	student := e.signUp(t)
	wantBody(t, e.do(t, "POST", s.enrollPath(student.ID), map[string]any{"class_id": num(t, class, "id"), "student_id": student.ID,
		"status": "completed", "enrolled_at": "2026-01-01T00:00:00+01:00", "completed_at": "2025-12-31T21:59:59-01:00"}, s.teacher.Access),
		http.StatusUnprocessableEntity, valueError(`["body","completed_at"]`, "2025-12-31T21:59:59-01:00", "completed_at must not be before enrolled_at"))
	wantBody(t, e.do(t, "POST", s.at("/course"), `{"title":"T","course_key":"K","start_date":"2026-02-03","end_date":"2026-02-02T00:00:00Z"}`, s.teacher.Access),
		http.StatusUnprocessableEntity, valueError(`["body","end_date"]`, "2026-02-02T00:00:00Z", "end_date must not be before start_date"))
}

// listed pages through path with size and returns the ids in the order seen,
// checking every page's total, page and size.
func listed(t *testing.T, e *env, path, token, idField string, size, wantTotal int) []string {
	t.Helper()
	var ids []string
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	for page := 1; ; page++ {
		res := e.do(t, "GET", fmt.Sprintf("%s%spage=%d&size=%d", path, sep, page, size), nil, token)
		wantStatus(t, res, http.StatusOK)
		if got := num(t, res, "total"); got != int64(wantTotal) {
			t.Errorf("%s: total %d, want %d", res, got, wantTotal)
		}
		if num(t, res, "page") != int64(page) || num(t, res, "size") != int64(size) {
			t.Errorf("%s: page/size not echoed", res)
		}
		items := field(t, res, "items").([]any)
		for _, it := range items {
			ids = append(ids, fmt.Sprint(it.(map[string]any)[idField]))
		}
		if len(items) < size {
			if page <= (wantTotal-1)/size {
				t.Errorf("%s: a short page before the last", res)
			}
			return ids
		}
		if page > wantTotal+1 {
			t.Fatalf("%s: pages never end", res)
		}
	}
}

// Every list, paged through with several sizes, shows each of the caller's
// items exactly once, in one order, with a total that counts them, and
// nothing of another user's or organisation's (their items interleaved).
func TestListsPageThroughEveryItemOnce(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	mine, theirs := e.newClassroom(t, nil), e.newClassroom(t, nil)
	const n = 5
	for i := range n {
		for _, c := range []classroom{mine, theirs} {
			u := c.student.Access
			wantStatus(t, e.do(t, "POST", "/agents", map[string]any{"name": fmt.Sprint("A", i), "system_prompt": "p"}, u), http.StatusCreated)
			wantStatus(t, e.do(t, "POST", "/user/practice/few-shot-examples", map[string]any{"input_text": "i", "output_text": "o", "is_active": i%2 == 0}, u), http.StatusCreated)
			e.startSession(t, u, c.class, map[string]any{"prompt_text": fmt.Sprint("hello ", i)})
			wantStatus(t, e.do(t, "POST", "/user/document", map[string]any{"title": "t", "content": "some text"}, u), http.StatusCreated)
			wantStatus(t, e.do(t, "POST", c.at("/course"), map[string]any{"title": "T", "course_key": fmt.Sprint("K", i)}, c.teacher.Access), http.StatusCreated)
			class := num(t, e.createClass(t, c.school, map[string]any{"name": fmt.Sprint("C", i)}), "id")
			wantStatus(t, e.enroll(t, c.school, class, c.student.ID), http.StatusCreated)
			wantStatus(t, e.enroll(t, c.school, c.class, e.signUp(t).ID), http.StatusCreated)
		}
	}
	for _, l := range []struct {
		name, path, token, id string
		total                 int
	}{
		{"agents", "/agents", mine.student.Access, "agent_id", n},
		{"few-shot examples", "/user/practice/few-shot-examples", mine.student.Access, "example_id", n},
		{"active few-shot examples", "/user/practice/few-shot-examples?is_active=true", mine.student.Access, "example_id", (n + 1) / 2},
		{"sessions", "/user/practice/sessions", mine.student.Access, "session_id", n},
		{"documents", "/user/document", mine.student.Access, "knowledge_id", n},
		{"courses", mine.at("/course"), mine.teacher.Access, "id", n},
		{"classes", mine.at("/classes"), mine.teacher.Access, "id", n + 1},
		{"class enrollments", mine.at("/classes/%d/enrollments", mine.class), mine.teacher.Access, "id", n + 1},
		{"my enrollments", "/user/class/enrollments", mine.student.Access, "id", n + 1},
	} {
		t.Run(l.name, func(t *testing.T) {
			all := listed(t, e, l.path, l.token, l.id, 200, l.total)
			if len(all) != l.total || len(slices.Compact(slices.Sorted(slices.Values(all)))) != l.total {
				t.Fatalf("%s: %v, want %d distinct items", l.path, all, l.total)
			}
			for _, size := range []int{1, 2, 3} {
				if got := listed(t, e, l.path, l.token, l.id, size, l.total); !slices.Equal(got, all) {
					t.Errorf("%s by %d: %v, want %v", l.path, size, got, all)
				}
			}
		})
	}
}
