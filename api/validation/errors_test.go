package validation

import (
	"encoding/json"
	"math"
	"testing"
)

func TestErrorItemKeyOrder(t *testing.T) {
	tests := []struct {
		name string
		item ErrorItem
		want string
	}{
		{"without ctx",
			ErrorItem{Type: "missing", Loc: []any{"body", "model_names", 0}, Msg: "Field required", Input: map[string]any{"b": 1, "a": "<&>"}},
			`{"type":"missing","loc":["body","model_names",0],"msg":"Field required","input":{"a":"<&>","b":1}}`},
		{"with ctx",
			ErrorItem{Type: "less_than_equal", Loc: []any{"body", "top_k"}, Msg: "Input should be less than or equal to 200", Input: json.Number("201"), Ctx: map[string]any{"le": 200}},
			`{"type":"less_than_equal","loc":["body","top_k"],"msg":"Input should be less than or equal to 200","input":201,"ctx":{"le":200}}`},
		{"nil loc and input",
			ErrorItem{Type: "missing", Msg: "Field required"},
			`{"type":"missing","loc":[],"msg":"Field required","input":null}`},
		{"python float rendering of inputs",
			ErrorItem{Type: "x", Loc: []any{"body"}, Msg: "m", Input: []any{json.Number("5.0"), json.Number("1E2"), json.Number("-0"), 2.0, math.Inf(1)}},
			`{"type":"x","loc":["body"],"msg":"m","input":[5.0,100.0,0,2.0,"Infinity"]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.item.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("\n got: %s\nwant: %s", got, tt.want)
			}
		})
	}
}

func TestDetailJSON(t *testing.T) {
	errs := Errors{
		missingError([]any{"query", "q"}, nil),
		ValueError([]any{"body", "end"}, "2020-01-01", "end must be after start"),
	}
	got, err := errs.DetailJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"detail":[` +
		`{"type":"missing","loc":["query","q"],"msg":"Field required","input":null},` +
		`{"type":"value_error","loc":["body","end"],"msg":"Value error, end must be after start","input":"2020-01-01","ctx":{"error":"end must be after start"}}]}`
	if string(got) != want {
		t.Errorf("\n got: %s\nwant: %s", got, want)
	}

	empty, _ := Errors(nil).DetailJSON()
	if string(empty) != `{"detail":[]}` {
		t.Errorf("empty list rendered as %s", empty)
	}

	if msg := errs.Error(); msg != "2 validation errors: query.q: Field required; body.end: Value error, end must be after start" {
		t.Errorf("Error() = %q", msg)
	}
	var asError error = errs[:1]
	if msg := asError.Error(); msg != "1 validation error: query.q: Field required" {
		t.Errorf("Error() = %q", msg)
	}
}

func TestExpectedList(t *testing.T) {
	tests := []struct {
		in   []string
		want string
	}{
		{[]string{"cosine_similarity"}, `'cosine_similarity'`},
		{[]string{"a", "b"}, `'a' or 'b'`},
		{[]string{"a", "b", "c"}, `'a', 'b' or 'c'`},
		{[]string{"it's", `say "hi"`, `both '"`, "tab\t", "é"}, `"it's", 'say "hi"', 'both \'"', 'tab\t' or 'é'`},
	}
	for _, tt := range tests {
		if got := expectedList(tt.in); got != tt.want {
			t.Errorf("expectedList(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestPyFloatRepr(t *testing.T) {
	tests := map[float64]string{
		0: "0.0", 5: "5.0", -0.5: "-0.5", 0.1: "0.1", 1e15: "1000000000000000.0", 1e16: "1e+16",
		1.5e16: "1.5e+16", 0.0001: "0.0001", 0.00001: "1e-05", 123456789.125: "123456789.125",
		1e-7: "1e-07", 1.7976931348623157e308: "1.7976931348623157e+308", math.Copysign(0, -1): "-0.0",
	}
	for f, want := range tests {
		if got := pyFloatRepr(f); got != want {
			t.Errorf("pyFloatRepr(%v) = %s, want %s", f, got, want)
		}
	}
}
