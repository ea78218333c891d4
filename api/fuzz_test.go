package api_test

// FuzzOperations drives every operation of the OpenAPI document with
// malformed input and asserts what any client must be able to rely on: no
// 5xx, every error in the contract's shape, and a bounded response.
//
// `go test` runs the seed corpus below (every operation with every kind of
// bad input); `make test` also fuzzes for a bounded time (see the Makefile).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// maxErrorBody bounds what a refusal may weigh, whatever the input.
const maxErrorBody = 64 << 10

// fuzzOp is one operation of the document.
type fuzzOp struct{ method, pattern string }

// documentOps lists the document's operations in a fixed order, so that a
// seed's operation index names the same operation on every run.
func (e *env) documentOps() []fuzzOp {
	var ops []fuzzOp
	for pattern, methods := range e.doc.Paths {
		for m := range methods {
			ops = append(ops, fuzzOp{strings.ToUpper(m), pattern})
		}
	}
	slices.SortFunc(ops, func(a, b fuzzOp) int {
		return strings.Compare(a.pattern+" "+a.method, b.pattern+" "+b.method)
	})
	return ops
}

var pathParam = regexp.MustCompile(`\{[^}]+\}`)

// Callers a fuzzed request is sent as.
const (
	callerNone = iota
	callerUser
	callerPartner
	callerAdmin
	callerGarbage
	callerCount
)

// Ways a fuzzed body is sent.
const (
	sendJSON      = iota // Content-Type: application/json, with Content-Length
	sendChunked          // no Content-Length
	sendText             // text/plain
	sendForm             // application/x-www-form-urlencoded
	sendMultipart        // multipart/form-data with a made-up boundary
	sendNoType           // no Content-Type
	sendTruncated        // Content-Length promises more than arrives, then the client stops writing
	sendCount
)

func deepNesting(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

func hugeArray(field string, n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(`"m%d"`, i)
	}
	return `{"` + field + `":[` + strings.Join(items, ",") + `]}`
}

func hugeObject(field string, n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(`"k%d":%d`, i, i)
	}
	return `{"` + field + `":{` + strings.Join(items, ",") + `}}`
}

// fuzzBodies are the seed bodies: wrong types, nulls, huge and negative
// numbers, ids past int64, bad UTF-8, NUL bytes, deep nesting, huge arrays and
// objects, truncated JSON.
func fuzzBodies() []string {
	return []string{
		``, `null`, `{}`, `[]`, `"text"`, `42`, `true`,
		`{"name":5,"system_prompt":null,"prompt_text":[],"model_names":"echo","capacity":"many"}`,
		`{"page":9223372036854775807,"capacity":-1,"top_k":1e400,"temperature":-0.0,"max_tokens":99999999999999999999}`,
		`{"class_id":9223372036854775808,"knowledge_ids":[-1,0,9223372036854775808],"few_shot_example_ids":[1.5,"x",null]}`,
		`{"org_id":-9223372036854775809,"user_id":1e20,"student_id":"9223372036854775808"}`,
		"{\"name\":\"\xff\xfe\",\"prompt_text\":\"a\xc3\x28b\"}",
		`{"name":"a\u0000b","email":"x\u0000@example.com","code":"\u0000"}`,
		`{"name":"\ud800","title":"\udfff"}`,
		`{"model_names":` + deepNesting(2000) + `}`,
		deepNesting(5000),
		hugeArray("model_names", 20000),
		hugeArray("allowed_model_ids", 20000),
		hugeArray("knowledge_ids", 20000),
		hugeArray("few_shot_example_ids", 20000),
		hugeObject("style_params", 20000),
		hugeObject("generation_params", 5000),
		`{"name": "ab`,
		`{"name":"a",}`,
		`{"name":"a"}{"name":"b"}`,
		`{"prompt_text":"` + strings.Repeat("x", 200000) + `"}`,
		`{"email":"` + strings.Repeat("a", 5000) + `@example.com","password":"` + strings.Repeat("p", 100000) + `"}`,
		`{"code":"` + strings.Repeat("9", 400) + `","refresh_token":"` + strings.Repeat("r", 10000) + `"}`,
		`{"start_at":"9999-99-99T99:99:99Z","end_at":"-0001-01-01T00:00:00Z","expires_at":"` + strings.Repeat("1", 1000) + `"}`,
		`{"min_score":"NaN","top_k":"Infinity","reranker_top_n":-9223372036854775808}`,
		"--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.pdf\"\r\nContent-Type: application/pdf\r\n\r\n%PDF-1.4 garbage\r\n--x--\r\n",
	}
}

// fuzzPathArgs fill every path parameter of the pattern.
var fuzzPathArgs = []string{"1", "0", "-1", "9223372036854775807", "9223372036854775808", "1e3", "abc", "%FF", "%00", "%C3%28", strings.Repeat("9", 300)}

var fuzzQueries = []string{
	"", "page=9223372036854775807", "page=99999999999999999999&size=0", "page=-1&size=201", "size=abc",
	"class_id=%FF", "class_id=9223372036854775808", "org_id=1&org_id=2", "course_id=%00",
	"category=%FF%FE&type=%00&stream=a%C3%28&after=%FF", "after=1/2/3", "after=" + strings.Repeat("9", 500),
	"limit=-5", "limit=99999999999999999999", "since=yesterday&until=%FF",
}

func FuzzOperations(f *testing.F) {
	e := sharedEnv(f)
	s := openSchool(f, e)
	plain := e.signUp(f)
	ops := e.documentOps()
	if len(ops) == 0 {
		f.Fatal("the document has no operations")
	}
	tokens := [callerCount]string{
		callerUser:    plain.Access,
		callerPartner: s.teacher.Access,
		callerAdmin:   s.admin.Access,
		callerGarbage: "eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.",
	}

	bodies := fuzzBodies()
	// Every operation gets every body, with the callers, queries, path
	// arguments and ways of sending taken in turn. When fuzzing (make test's
	// bounded run) each operation gets three seeds: the engine first runs
	// every seed for coverage within -fuzztime, and 453 seeds took all of
	// make test's 20 s, leaving no time to mutate anything.
	fuzzing := flag.Lookup("test.fuzz") != nil && flag.Lookup("test.fuzz").Value.String() != ""
	for i := range ops {
		for j, body := range bodies {
			if fuzzing && (i+j)%(len(bodies)/2) != 0 {
				continue
			}
			f.Add(uint16(i), uint8(j%callerCount), fuzzPathArgs[j%len(fuzzPathArgs)], fuzzQueries[j%len(fuzzQueries)],
				uint8(j%sendCount), []byte(body))
		}
		// Every operation as each caller with an empty body (when fuzzing,
		// one caller, in turn), and truncated.
		for c := 0; c < callerCount; c++ {
			if fuzzing && c != i%callerCount {
				continue
			}
			f.Add(uint16(i), uint8(c), "1", "", uint8(sendJSON), []byte(`{}`))
		}
		if !fuzzing {
			f.Add(uint16(i), uint8(callerAdmin), "1", "", uint8(sendTruncated), []byte(`{"name":"a","title":"b"}`))
		}
	}

	f.Fuzz(func(t *testing.T, opIndex uint16, caller uint8, pathArg, query string, mode uint8, body []byte) {
		op := ops[int(opIndex)%len(ops)]
		if op.pattern == "/admin/users/{user_id}/erase" {
			// The fuzz's admin would erase whichever user of the package's
			// tests had that id: a well-formed id names no user.
			if n, err := strconv.ParseInt(pathArg, 10, 64); err == nil && n > 0 {
				pathArg = "9223372036854775807"
			}
		}
		path := pathParam.ReplaceAllLiteralString(op.pattern, escapePathArg(pathArg))
		if q := strings.Map(dropControl, query); q != "" {
			path += "?" + q
		}
		if _, err := url.ParseRequestURI(path); err != nil {
			t.Skip("not a request target a client could send")
		}
		token := tokens[int(caller)%callerCount]
		switch int(mode) % sendCount {
		case sendTruncated:
			checkTruncated(t, e, op.method, path, token, body)
			return
		default:
			res := fuzzSend(t, e, op.method, path, token, int(mode)%sendCount, body)
			checkAnswer(t, e, res)
		}
	})
}

// escapePathArg keeps percent-escapes as the fuzzer wrote them (so that bad
// UTF-8 and NUL reach the router) and escapes the rest.
func escapePathArg(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteString(s[i : i+3])
			i += 2
			continue
		}
		b.WriteString(url.PathEscape(string(c)))
	}
	if b.Len() == 0 {
		return "x"
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// dropControl leaves out what no HTTP client puts in a request line.
func dropControl(r rune) rune {
	if r <= ' ' || r == 0x7f || r == '#' {
		return -1
	}
	return r
}

func fuzzSend(t *testing.T, e *env, method, path, token string, mode int, body []byte) response {
	t.Helper()
	var reader io.Reader
	if len(body) > 0 || mode == sendJSON {
		reader = bytes.NewReader(body)
	}
	if mode == sendChunked && reader != nil {
		reader = struct{ io.Reader }{reader}
	}
	req, err := http.NewRequest(method, e.srv.URL+path, reader)
	if err != nil {
		t.Skipf("not a request a client could send: %v", err)
	}
	switch mode {
	case sendJSON, sendChunked:
		req.Header.Set("Content-Type", "application/json")
	case sendText:
		req.Header.Set("Content-Type", "text/plain")
	case sendForm:
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	case sendMultipart:
		req.Header.Set("Content-Type", "multipart/form-data; boundary=x")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody+1))
	if err != nil {
		t.Fatalf("%s %s: reading the response: %v", method, path, err)
	}
	return response{Method: method, Path: path, Status: resp.StatusCode, Header: resp.Header, Body: raw}
}

// checkAnswer holds a response to what the contract promises.
func checkAnswer(t *testing.T, e *env, res response) {
	t.Helper()
	if res.Status >= 500 {
		t.Fatalf("%s: a 5xx from client input; the service logged:\n%s", res,
			strings.Join(e.logs.of(res.Header.Get("X-Request-ID")), "\n"))
	}
	if res.Status < 400 {
		return
	}
	if len(res.Body) > maxErrorBody {
		t.Fatalf("%s %s → %d: the error body is over %d bytes", res.Method, res.Path, res.Status, maxErrorBody)
	}
	checkErrorShape(t, res)
	if t.Failed() {
		return
	}
	res.JSON, _ = decodeJSON(res.Body)
	e.check(t, res)
}

// checkErrorShape: {"detail": "<sentence>"}, or a 422's list of pydantic
// items, each with type, loc (starting at body, query or path), msg and input.
func checkErrorShape(t *testing.T, res response) {
	t.Helper()
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s: an error answered with Content-Type %q", res, ct)
	}
	var body struct {
		Detail json.RawMessage `json:"detail"`
	}
	if err := json.Unmarshal(res.Body, &body); err != nil || len(body.Detail) == 0 {
		t.Fatalf("%s: the error has no detail", res)
	}
	var sentence string
	if json.Unmarshal(body.Detail, &sentence) == nil {
		if sentence == "" {
			t.Fatalf("%s: an empty detail", res)
		}
		return
	}
	if res.Status != http.StatusUnprocessableEntity {
		t.Fatalf("%s: only a 422 lists validation errors", res)
	}
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(body.Detail, &items); err != nil || len(items) == 0 {
		t.Fatalf("%s: detail is neither a sentence nor a list of errors", res)
	}
	for _, item := range items {
		for _, k := range []string{"type", "loc", "msg", "input"} {
			if _, ok := item[k]; !ok {
				t.Fatalf("%s: an error item without %q", res, k)
			}
		}
		var loc []any
		if err := json.Unmarshal(item["loc"], &loc); err != nil || len(loc) == 0 {
			t.Fatalf("%s: loc is not a list", res)
		}
		if first, _ := loc[0].(string); first != "body" && first != "query" && first != "path" && first != "header" {
			t.Fatalf("%s: loc starts with %v", res, loc[0])
		}
	}
}

// checkTruncated sends a request whose Content-Length promises more than the
// client writes before it stops writing: the answer is a 4xx, never a 5xx.
func checkTruncated(t *testing.T, e *env, method, path, token string, body []byte) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(e.srv.URL, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	var head strings.Builder
	fmt.Fprintf(&head, "%s %s HTTP/1.1\r\nHost: lectern\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", method, path, len(body)+64)
	if token != "" {
		fmt.Fprintf(&head, "Authorization: Bearer %s\r\n", token)
	}
	head.WriteString("\r\n")
	if _, err := io.WriteString(conn, head.String()); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		// The server may close a connection whose request it cannot read,
		// as long as it never answers it with a 5xx.
		return
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody+1))
	res := response{Method: method, Path: path, Status: resp.StatusCode, Header: resp.Header, Body: raw}
	if res.Status >= 500 {
		t.Fatalf("%s: a 5xx for a truncated body; the service logged:\n%s", res,
			strings.Join(e.logs.of(res.Header.Get("X-Request-ID")), "\n"))
	}
	if res.Status >= 400 {
		checkErrorShape(t, res)
	}
}
