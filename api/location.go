package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"lectern/api/validation"
)

// locatedBy names, on an operation answering 201 Created, the GET operation
// that reads what it created: the answer's Location is that operation's
// path, its last parameter filled from the response body's field id, its
// others from the creating request's path parameters of the same name.
// The OpenAPI document declares Location on exactly these 201s, and the
// router sends it from the same template, so the two cannot drift apart.
//
// A 201 whose resource has no GET of its own sends no Location (each such
// operation says so in its table).
type locatedBy struct {
	get string // operationId of the GET
	id  string // the response body's field holding the resource's id
}

var pathParam = regexp.MustCompile(`\{([^}]+)\}`)

// resolveLocations checks every operation's locatedBy against the table
// and the response schemas, and sets its Location template: a mistake is a
// programming error, reported when the server is built.
func resolveLocations(ops []operation, schemas schema) error {
	byID := map[string]operation{}
	for _, op := range ops {
		byID[op.id] = op
	}
	for i := range ops {
		op := &ops[i]
		if op.location == nil {
			continue
		}
		get, ok := byID[op.location.get]
		if !ok || get.method != http.MethodGet {
			return fmt.Errorf("api: %s: Location names %q, which is no GET operation", op.id, op.location.get)
		}
		if op.status != http.StatusCreated {
			return fmt.Errorf("api: %s: Location on a %d, not a 201", op.id, op.status)
		}
		props, _ := schemas[op.response].(schema)["properties"].(schema)
		if _, ok := props[op.location.id]; !ok {
			return fmt.Errorf("api: %s: its response %q has no field %q for Location", op.id, op.response, op.location.id)
		}
		names := pathParam.FindAllStringSubmatch(get.path, -1)
		if len(names) == 0 {
			return fmt.Errorf("api: %s: Location %s has no parameter for the created resource", op.id, get.path)
		}
		for _, m := range names[:len(names)-1] {
			if !hasField(op.pathParams, m[1]) {
				return fmt.Errorf("api: %s: Location %s needs path parameter %q, which %s lacks", op.id, get.path, m[1], op.path)
			}
		}
		op.locationPath = get.path
	}
	return nil
}

func hasField(fields []validation.Field, name string) bool {
	for _, f := range fields {
		if f.Name == name {
			return true
		}
	}
	return false
}

// locate fills op's Location template for a created resource whose JSON
// answer is body; "" when the body does not name it.
func locate(op operation, r *http.Request, in input, body []byte) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return ""
	}
	names := pathParam.FindAllStringSubmatchIndex(op.locationPath, -1)
	var b strings.Builder
	last := 0
	for i, m := range names {
		b.WriteString(op.locationPath[last:m[0]])
		last = m[1]
		name := op.locationPath[m[2]:m[3]]
		var v string
		if i < len(names)-1 {
			if n, ok := in.path.Int(name); ok {
				v = strconv.FormatInt(n, 10)
			} else {
				v = chi.URLParam(r, name)
			}
		} else {
			v = idText(fields[op.location.id])
		}
		if v == "" {
			return ""
		}
		b.WriteString(url.PathEscape(v))
	}
	b.WriteString(op.locationPath[last:])
	return b.String()
}

// idText is a JSON number or string as text; "" for anything else.
func idText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	var n json.Number
	if json.Unmarshal(raw, &n) == nil && n != "" {
		return n.String()
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

// locationWriter holds back a 201 JSON answer's status until its body is
// written, to set Location from it. Any other answer (an error, a streamed
// turn, whose session event names the session) passes through untouched.
type locationWriter struct {
	http.ResponseWriter
	op   operation
	r    *http.Request
	in   input
	held int // the status held back; 0 when none
}

func (l *locationWriter) Unwrap() http.ResponseWriter { return l.ResponseWriter }

func (l *locationWriter) WriteHeader(code int) {
	mt, _, _ := mime.ParseMediaType(l.Header().Get("Content-Type"))
	if code == l.op.status && mt == "application/json" && l.held == 0 {
		l.held = code
		return
	}
	l.ResponseWriter.WriteHeader(code)
}

func (l *locationWriter) Write(p []byte) (int, error) {
	if l.held != 0 {
		if loc := locate(l.op, l.r, l.in, p); loc != "" {
			l.Header().Set("Location", loc)
		}
		l.release()
	}
	return l.ResponseWriter.Write(p)
}

// release sends a status still held back (an answer without a body).
func (l *locationWriter) release() {
	if l.held != 0 {
		code := l.held
		l.held = 0
		l.ResponseWriter.WriteHeader(code)
	}
}
