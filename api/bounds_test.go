package api_test

// Bounds on what one request can make the service hold or answer: arrays and
// free-form objects, pages, and values that are not text.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// maxRefusal is the most a refusal of any 1 MiB request may weigh.
const maxRefusal = 16 << 10

func manyStrings(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("m%d", i)
	}
	return out
}

func manyInts(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

func manyKeys(n int) map[string]int {
	out := make(map[string]int, n)
	for i := 0; i < n; i++ {
		out[fmt.Sprintf("k%d", i)] = i
	}
	return out
}

// fastestOf is the shortest of n runs of f.
func fastestOf(n int, f func()) time.Duration {
	best := time.Duration(1<<63 - 1)
	for i := 0; i < n; i++ {
		start := time.Now()
		f()
		if d := time.Since(start); d < best {
			best = d
		}
	}
	return best
}

// wantTooLong checks a small 422 whose only item is pydantic's too_long at loc.
func wantTooLong(t *testing.T, res response, loc, fieldType string, maxLen, actual int) {
	t.Helper()
	if res.Status != http.StatusUnprocessableEntity {
		t.Fatalf("%s %s: status %d, want 422", res.Method, res.Path, res.Status)
	}
	if len(res.Body) > maxRefusal {
		t.Errorf("%s %s: the 422 weighs %d bytes", res.Method, res.Path, len(res.Body))
	}
	var body struct {
		Detail []struct {
			Type string         `json:"type"`
			Loc  []any          `json:"loc"`
			Msg  string         `json:"msg"`
			Ctx  map[string]any `json:"ctx"`
		} `json:"detail"`
	}
	if err := json.Unmarshal(res.Body, &body); err != nil || len(body.Detail) != 1 {
		t.Fatalf("%s %s: want one error item: %.500s", res.Method, res.Path, res.Body)
	}
	item := body.Detail[0]
	plural := "s"
	if maxLen == 1 {
		plural = ""
	}
	wantMsg := fmt.Sprintf("%s should have at most %d item%s after validation, not %d", fieldType, maxLen, plural, actual)
	if item.Type != "too_long" || fmt.Sprint(item.Loc) != loc || item.Msg != wantMsg ||
		item.Ctx["max_length"] != float64(maxLen) || item.Ctx["actual_length"] != float64(actual) || item.Ctx["field_type"] != fieldType {
		t.Errorf("%s %s: got %+v, want too_long at %s: %q", res.Method, res.Path, item, loc, wantMsg)
	}
}

func TestCollectionsAreBounded(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	s := openSchool(t, e)
	u := e.signUp(t)

	t.Run("100 000 model names", func(t *testing.T) {
		names := manyStrings(100_000)
		res := e.do(t, "POST", "/user/practice/sessions/run?class_id=1", map[string]any{
			"prompt_text": "hi", "model_names": names}, u.Access)
		wantTooLong(t, res, "[body model_names]", "List", 10, 100_000)
		// The refusal costs what reading the request costs, no more: the
		// baseline carries the same 100 000 strings in a field nobody
		// reads, beside one model name (refused as a turn in
		// another's class, or for the unknown model). The
		// fastest of three of each, so that the machine's load weighs on
		// both alike.
		refusal := fastestOf(3, func() {
			e.do(t, "POST", "/user/practice/sessions/run?class_id=1", map[string]any{
				"prompt_text": "hi", "model_names": names}, u.Access)
		})
		baseline := fastestOf(3, func() {
			res := e.do(t, "POST", "/user/practice/sessions/run?class_id=1", map[string]any{
				"prompt_text": "hi", "model_names": []string{"m0"}, "ignored": names}, u.Access)
			if res.Status/100 != 4 {
				t.Errorf("the baseline answered %d, want a refusal", res.Status)
			}
		})
		t.Logf("refusal %s, baseline %s", refusal, baseline)
		if refusal > 2*baseline+250*time.Millisecond {
			t.Errorf("the refusal took %s, reading the same request %s", refusal, baseline)
		}
	})
	t.Run("knowledge ids", func(t *testing.T) {
		res := e.do(t, "POST", "/user/practice/sessions/run?class_id=1", map[string]any{
			"prompt_text": "hi", "knowledge_ids": manyInts(21)}, u.Access)
		wantTooLong(t, res, "[body knowledge_ids]", "List", 20, 21)
	})
	t.Run("few-shot example ids", func(t *testing.T) {
		res := e.do(t, "PATCH", "/user/practice/sessions/1/settings", map[string]any{
			"few_shot_example_ids": manyInts(100_000)}, u.Access)
		wantTooLong(t, res, "[body few_shot_example_ids]", "List", 50, 100_000)
	})
	t.Run("allowed model ids of a class", func(t *testing.T) {
		res := e.do(t, "POST", s.at("/classes?course_id=1"), map[string]any{
			"name": "Big", "allowed_model_ids": manyInts(100_000)}, s.teacher.Access)
		wantTooLong(t, res, "[body allowed_model_ids]", "List", 100, 100_000)
	})
	t.Run("60 000 style params", func(t *testing.T) {
		res := e.do(t, "POST", "/user/practice/sessions/run?class_id=1", map[string]any{
			"prompt_text": "hi", "style_params": manyKeys(60_000)}, u.Access)
		wantTooLong(t, res, "[body style_params]", "Dictionary", 50, 60_000)
	})
	t.Run("few-shot meta", func(t *testing.T) {
		res := e.do(t, "POST", "/user/practice/few-shot-examples", map[string]any{
			"input_text": "i", "output_text": "o", "meta": manyKeys(51)}, u.Access)
		wantTooLong(t, res, "[body meta]", "Dictionary", 50, 51)
	})
	t.Run("a megabyte of bad items gets a small answer", func(t *testing.T) {
		names := make([]any, 9)
		for i := range names {
			names[i] = strings.Repeat("y", 100_000)
		}
		res := e.do(t, "POST", "/user/practice/sessions/run?class_id=1", map[string]any{
			"model_names": names, "style_params": "x", "generation_params": 1, "knowledge_ids": []any{"a", "b"}}, u.Access)
		wantStatus(t, res, http.StatusUnprocessableEntity)
		if len(res.Body) > maxRefusal {
			t.Errorf("the 422 weighs %d bytes: %.300s", len(res.Body), res.Body)
		}
	})
}

// Every array, free-form object, string and integer a request can hold has
// a documented bound, so none can be added without one.
func TestEveryCollectionIsBounded(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	var doc any
	if err := json.Unmarshal(e.doc.raw, &doc); err != nil {
		t.Fatal(err)
	}
	paths := doc.(map[string]any)["paths"].(map[string]any)
	checked, strs, ints := 0, 0, 0
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch x := v.(type) {
		case map[string]any:
			types := fmt.Sprint(x["type"])
			if strings.Contains(types, "array") {
				checked++
				if _, ok := x["maxItems"]; !ok {
					t.Errorf("%s: an array without maxItems", where)
				}
			}
			if strings.Contains(types, "object") && x["properties"] == nil {
				checked++
				if _, ok := x["maxProperties"]; !ok {
					t.Errorf("%s: a free-form object without maxProperties", where)
				}
			}
			// A string of its own (not an enum, a date or a uuid: those are
			// bounded by their form).
			if strings.Contains(types, "string") && x["enum"] == nil && x["const"] == nil && x["format"] == nil && x["pattern"] == nil {
				strs++
				if _, ok := x["maxLength"]; !ok {
					t.Errorf("%s: a string without maxLength: %v", where, x)
				}
			}
			if strings.Contains(types, "integer") {
				ints++ // bounded by int64 at the most (a larger one is a 422: TestValuesThatAreNotText)
			}
			for k, sub := range x {
				walk(where+"/"+k, sub)
			}
		case []any:
			for i, sub := range x {
				walk(fmt.Sprintf("%s/%d", where, i), sub)
			}
		}
	}
	for path, ops := range paths {
		for method, op := range ops.(map[string]any) {
			o := op.(map[string]any)
			walk(method+" "+path+" requestBody", o["requestBody"])
			walk(method+" "+path+" parameters", o["parameters"])
		}
	}
	if checked < 9 || strs < 30 || ints < 20 {
		t.Errorf("only %d collections, %d strings and %d integers found in request schemas: is the walk right?", checked, strs, ints)
	}
}

// Pages past the bound are a 422 on every list, never an OFFSET out of range.
func TestPagesAreBounded(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	admin := asAdmin(t, e)
	fill := regexp.MustCompile(`\{[^}]+\}`)
	lists := 0
	for path, ops := range e.doc.Paths {
		for method, op := range ops {
			paged := false
			for _, p := range op.Parameters {
				paged = paged || p.In == "query" && p.Name == "page"
			}
			if !paged {
				continue
			}
			lists++
			for _, page := range []string{"9223372036854775807", "99999999999999999999", "1000001"} {
				target := fill.ReplaceAllString(path, "1") + "?page=" + page
				res := e.do(t, strings.ToUpper(method), target, nil, admin.Access)
				if res.Status != http.StatusUnprocessableEntity || !strings.Contains(string(res.Body), `"loc":["query","page"]`) {
					t.Errorf("%s %s: %d %s, want a 422 at [query page]", method, target, res.Status, res.Body)
				}
			}
		}
	}
	if lists < 10 {
		t.Errorf("%d paginated lists found, want the 10 of the interface", lists)
	}
	res := e.do(t, "GET", "/agents?page=1000001", nil, admin.Access)
	wantBody(t, res, http.StatusUnprocessableEntity,
		`{"detail":[{"type":"less_than_equal","loc":["query","page"],"msg":"Input should be less than or equal to 1000000","input":"1000001","ctx":{"le":1000000}}]}`)
}

// Query and path values that are not UTF-8 text are a 422, not a database error.
func TestValuesThatAreNotText(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	admin := asAdmin(t, e)
	for _, tc := range []struct{ path, loc string }{
		{"/admin/events?stream=%FF", `["query","stream"]`},
		{"/admin/events?category=a%C3%28", `["query","category"]`},
		{"/admin/events?type=%FE%FF", `["query","type"]`},
		{"/admin/events/streams/%FF", `["path","stream"]`},
	} {
		res := e.do(t, "GET", tc.path, nil, admin.Access)
		if res.Status != http.StatusUnprocessableEntity || !strings.Contains(string(res.Body),
			`"type":"string_unicode","loc":`+tc.loc+`,"msg":"Input should be a valid string, unable to parse raw data as a unicode string"`) {
			t.Errorf("GET %s: %d %s, want string_unicode at %s", tc.path, res.Status, res.Body, tc.loc)
		}
	}
	res := e.do(t, "GET", "/admin/events?stream=a%00b", nil, admin.Access)
	wantStatus(t, res, http.StatusUnprocessableEntity)
}
