package validation

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

// searchSchema resembles a real request body.
var searchSchema = Schema{Fields: []Field{
	{Name: "query", Kind: String, Required: true, MinLength: 1, MaxLength: 200},
	{Name: "model_names", Kind: List, Required: true, Elem: &Field{Kind: String}},
	{Name: "top_k", Kind: Int, Ge: Bound(1), Le: Bound(200)},
	{Name: "mode", Kind: Enum, Enum: []string{"accurate", "balanced", "creative", "custom"}},
}}

func TestDecodeBody(t *testing.T) {
	missingBody := `{"type":"missing","loc":["body"],"msg":"Field required","input":null}`
	tests := []struct {
		name string
		body string
		want string
	}{
		{"empty", ``, missingBody},
		{"blank", " \r\n\t", missingBody},
		{"json null", `null`, missingBody},
		{"array", `[1, 2.50]`,
			`{"type":"model_attributes_type","loc":["body"],"msg":"Input should be a valid dictionary or object to extract fields from","input":[1,2.5]}`},
		{"string", `"x"`,
			`{"type":"model_attributes_type","loc":["body"],"msg":"Input should be a valid dictionary or object to extract fields from","input":"x"}`},
		{"missing fields get the parent object", `{"extra": 1.0, "top_k": 5}`, strings.Join([]string{
			`{"type":"missing","loc":["body","query"],"msg":"Field required","input":{"extra":1.0,"top_k":5}}`,
			`{"type":"missing","loc":["body","model_names"],"msg":"Field required","input":{"extra":1.0,"top_k":5}}`,
		}, ",")},
		{"all errors in schema order", `{"mode": "fast", "top_k": 0, "model_names": ["a", 7], "query": ""}`, strings.Join([]string{
			`{"type":"string_too_short","loc":["body","query"],"msg":"String should have at least 1 character","input":"","ctx":{"min_length":1}}`,
			`{"type":"string_type","loc":["body","model_names",1],"msg":"Input should be a valid string","input":7}`,
			`{"type":"greater_than_equal","loc":["body","top_k"],"msg":"Input should be greater than or equal to 1","input":0,"ctx":{"ge":1}}`,
			`{"type":"enum","loc":["body","mode"],"msg":"Input should be 'accurate', 'balanced', 'creative' or 'custom'","input":"fast","ctx":{"expected":"'accurate', 'balanced', 'creative' or 'custom'"}}`,
		}, ",")},
		{"duplicate keys: last wins", `{"query": 1, "query": "ok", "model_names": []}`, ``},
		{"byte order mark", "\uFEFF{\"query\": \"q\", \"model_names\": []}", ``},
		{"input keeps html characters", `{"query": "<a&b>", "model_names": "<x>"}`,
			`{"type":"list_type","loc":["body","model_names"],"msg":"Input should be a valid list","input":"<x>"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs := DecodeBody([]byte(tt.body), searchSchema)
			if got := detail(t, errs); got != tt.want {
				t.Errorf("errors\n got: %s\nwant: %s", got, tt.want)
			}
		})
	}
}

// An object's members, where its field names a schema for them, are
// checked with the rest: their errors come in the field's place, at their
// own locations, beside the other fields' (pydantic's nested model).
func TestDecodeBodyObjectMembers(t *testing.T) {
	params := Schema{Fields: []Field{{Name: "top_p", Kind: Float, Nullable: true, Le: Bound(1)}, {Name: "n", Kind: Int}}}
	s := Schema{Fields: []Field{
		{Name: "mode", Kind: Enum, Enum: []string{"a"}},
		{Name: "params", Kind: Object, MaxItems: 4, Members: &params},
	}}
	_, errs := DecodeBody([]byte(`{"mode":"b","params":{"top_p":2,"n":"x","other":1}}`), s)
	want := strings.Join([]string{
		`{"type":"enum","loc":["body","mode"],"msg":"Input should be 'a'","input":"b","ctx":{"expected":"'a'"}}`,
		`{"type":"less_than_equal","loc":["body","params","top_p"],"msg":"Input should be less than or equal to 1","input":2,"ctx":{"le":1.0}}`,
		`{"type":"int_parsing","loc":["body","params","n"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"x"}`,
	}, ",")
	if got := detail(t, errs); got != want {
		t.Errorf("errors\n got: %s\nwant: %s", got, want)
	}
	vals, errs := DecodeBody([]byte(`{"params":{"top_p":null,"n":3}}`), s)
	if obj, ok := vals.Object("params"); errs != nil || !ok || len(obj) != 2 {
		t.Errorf("valid members: %v, %v %v", errs, obj, ok)
	}
}

func TestDecodeBodyOptionalSchema(t *testing.T) {
	s := Schema{Fields: []Field{{Name: "limit", Kind: Int}}}
	for _, body := range []string{``, `  `, `null`} {
		vals, errs := DecodeBody([]byte(body), s)
		if errs != nil || vals.Has("limit") {
			t.Errorf("body %q: got errors %v, Has=%v; want an empty result", body, errs, vals.Has("limit"))
		}
	}
}

// TestDecodeBodyInvalidJSON checks json_invalid items against CPython's
// json.loads messages and character (not byte) positions.
func TestDecodeBodyInvalidJSON(t *testing.T) {
	tests := []struct {
		body   string
		pos    int
		reason string
	}{
		{`{`, 1, "Expecting property name enclosed in double quotes"},
		{`{"a"`, 4, "Expecting ':' delimiter"},
		{`{"a":`, 5, "Expecting value"},
		{`{"a": 1`, 7, "Expecting ',' delimiter"},
		{`{"a": 1 "b": 2}`, 8, "Expecting ',' delimiter"},
		{`{a: 1}`, 1, "Expecting property name enclosed in double quotes"},
		{`{'a': 1}`, 1, "Expecting property name enclosed in double quotes"},
		{`{"a": tru}`, 6, "Expecting value"},
		{`{"a": NaN}`, 6, "Expecting value"},
		{`{"a": -}`, 6, "Expecting value"},
		{`{"a": .5}`, 6, "Expecting value"},
		{`{"a": 01}`, 7, "Expecting ',' delimiter"},
		{`{"a": 1.}`, 7, "Expecting ',' delimiter"},
		{`{"a": 1e+}`, 7, "Expecting ',' delimiter"},
		{`{"a": 1,}`, 7, "Illegal trailing comma before end of object"},
		{`[1, 2,]`, 5, "Illegal trailing comma before end of array"},
		{`[1 2]`, 3, "Expecting ',' delimiter"},
		{`{"a": "b`, 6, "Unterminated string starting at"},
		{`"abc\`, 0, "Unterminated string starting at"},
		{`{"a": "b\x"}`, 8, `Invalid \escape`},
		{`{"a": "\u12"}`, 8, `Invalid \uXXXX escape`},
		{`{"a": "\u12G4"}`, 8, `Invalid \uXXXX escape`},
		{`{"a": "\ud800\uZZ00"}`, 14, `Invalid \uXXXX escape`},
		{"{\"a\": \"tab\there\"}", 10, "Invalid control character at"},
		{`{} {}`, 3, "Extra data"},
		{`{}x`, 2, "Extra data"},
		{"\n\n{\"a\":\n  }", 10, "Expecting value"},
		{`{"é": "ü", "x": !}`, 16, "Expecting value"},
		{`{"😀😀": ]}`, 7, "Expecting value"},
		{`x`, 0, "Expecting value"},
		{"{\"a\": \"\xff\"}", 7, "Invalid UTF-8 byte sequence"},
		{strings.Repeat("[", maxJSONDepth+1), maxJSONDepth, "Maximum nesting depth exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			_, errs := DecodeBody([]byte(tt.body), searchSchema)
			want := detail(t, Errors{jsonInvalidError(tt.pos, tt.reason)})
			if got := detail(t, errs); got != want {
				t.Errorf("errors\n got: %s\nwant: %s", got, want)
			}
		})
	}
	// The exact shape, once.
	_, errs := DecodeBody([]byte(`{"a": 1,`), searchSchema)
	want := `{"type":"json_invalid","loc":["body",8],"msg":"JSON decode error","input":{},"ctx":{"error":"Expecting property name enclosed in double quotes"}}`
	if got := detail(t, errs); got != want {
		t.Errorf("errors\n got: %s\nwant: %s", got, want)
	}
}

func TestDecodedJSONValues(t *testing.T) {
	s := Schema{Fields: []Field{{Name: "meta", Kind: Object}, {Name: "tag", Kind: String}}}
	vals, errs := DecodeBody([]byte(`{"meta": {"big": 12345678901234567890, "s": "\ud83d\ude00\u00e9\n", "n": null, "l": [true, false]}, "tag": "a\/b"}`), s)
	if errs != nil {
		t.Fatalf("unexpected errors: %v", errs)
	}
	meta, _ := vals.Object("meta")
	if got := meta["big"]; got != any(json.Number("12345678901234567890")) {
		t.Errorf("big number = %#v, want it kept exactly", got)
	}
	if got := meta["s"]; got != "😀é\n" {
		t.Errorf("escapes decoded to %q", got)
	}
	if tag, _ := vals.String("tag"); tag != "a/b" {
		t.Errorf("tag = %q", tag)
	}
}

func TestQuery(t *testing.T) {
	fields := []Field{
		{Name: "q", Kind: String, Required: true},
		{Name: "limit", Kind: Int, Ge: Bound(1), Le: Bound(100)},
		{Name: "exact", Kind: Bool},
		{Name: "ids", Kind: List, Elem: &Field{Kind: Int}},
		{Name: "since", Kind: Date},
	}
	tests := []struct {
		name  string
		query string
		want  string
	}{
		{"valid", "q=a+b&limit=10&exact=yes&ids=1&ids=2", ``},
		{"missing has input null", "limit=10", `{"type":"missing","loc":["query","q"],"msg":"Field required","input":null}`},
		{"strings are coerced", "q=x&limit=abc&exact=maybe&ids=1&ids=x&since=2023-02-30", strings.Join([]string{
			`{"type":"int_parsing","loc":["query","limit"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"abc"}`,
			`{"type":"bool_parsing","loc":["query","exact"],"msg":"Input should be a valid boolean, unable to interpret input","input":"maybe"}`,
			`{"type":"int_parsing","loc":["query","ids",1],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"x"}`,
			`{"type":"date_from_datetime_parsing","loc":["query","since"],"msg":"Input should be a valid date or datetime, day value is outside expected range","input":"2023-02-30","ctx":{"error":"day value is outside expected range"}}`,
		}, ",")},
		{"empty value is validated", "q=&limit=", `{"type":"int_parsing","loc":["query","limit"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":""}`},
		{"last value wins", "q=x&limit=500&limit=5", ``},
		{"bounds", "q=x&limit=0", `{"type":"greater_than_equal","loc":["query","limit"],"msg":"Input should be greater than or equal to 1","input":"0","ctx":{"ge":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			values, err := url.ParseQuery(tt.query)
			if err != nil {
				t.Fatal(err)
			}
			_, errs := Query(values, fields...)
			if got := detail(t, errs); got != tt.want {
				t.Errorf("errors\n got: %s\nwant: %s", got, tt.want)
			}
		})
	}

	values, _ := url.ParseQuery("q=a+b&limit=500&limit=10&exact=yes&ids=1&ids=2")
	vals, _ := Query(values, fields...)
	q, _ := vals.String("q")
	limit, _ := vals.Int("limit")
	exact, _ := vals.Bool("exact")
	ids, _ := vals.Ints("ids")
	if q != "a b" || limit != 10 || !exact || len(ids) != 2 || ids[1] != 2 || vals.Has("since") {
		t.Errorf("got q=%q limit=%d exact=%v ids=%v Has(since)=%v", q, limit, exact, ids, vals.Has("since"))
	}
}

func TestPath(t *testing.T) {
	fields := []Field{{Name: "id", Kind: Int, Required: true}, {Name: "slug", Kind: String, Required: true}}
	_, errs := Path(map[string]string{"id": "12a"}, fields...)
	want := strings.Join([]string{
		`{"type":"int_parsing","loc":["path","id"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"12a"}`,
		`{"type":"missing","loc":["path","slug"],"msg":"Field required","input":null}`,
	}, ",")
	if got := detail(t, errs); got != want {
		t.Errorf("errors\n got: %s\nwant: %s", got, want)
	}
	vals, errs := Path(map[string]string{"id": " 42 ", "slug": "x"}, fields...)
	if id, _ := vals.Int("id"); errs != nil || id != 42 {
		t.Errorf("got id=%d errors=%v", id, errs)
	}
}

func TestNULRefused(t *testing.T) {
	s := Schema{Fields: []Field{{Name: "name", Kind: String, Required: true}}}
	_, errs := DecodeBody([]byte(`{"name":"a\u0000b"}`), s)
	got, _ := errs.DetailJSON()
	want := `{"detail":[{"type":"value_error","loc":["body","name"],"msg":"Value error, String must not contain NUL characters","input":"a\u0000b","ctx":{"error":"String must not contain NUL characters"}}]}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
