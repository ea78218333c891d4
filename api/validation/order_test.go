package validation

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestErrorInputKeepsRequestOrder checks that objects echoed as an error's
// input keep the client's key order, as FastAPI does (Python dicts are
// ordered): at the top level, nested, inside lists, and with duplicate keys
// (first position, last value).
func TestErrorInputKeepsRequestOrder(t *testing.T) {
	agent := Schema{Fields: []Field{
		{Name: "name", Kind: String, Required: true},
		{Name: "system_prompt", Kind: String},
		{Name: "is_active", Kind: Bool},
		{Name: "tags", Kind: List, Elem: &Field{Kind: String}},
	}}
	tests := []struct {
		name string
		body string
		want string
	}{
		{"missing field echoes the body in request order",
			`{"system_prompt":"p","is_active":true}`,
			`{"type":"missing","loc":["body","name"],"msg":"Field required","input":{"system_prompt":"p","is_active":true}}`},
		{"unknown keys keep their place too",
			`{"zeta": 1, "é": 2.50, "alpha": null, "is_active": false}`,
			`{"type":"missing","loc":["body","name"],"msg":"Field required","input":{"zeta":1,"é":2.5,"alpha":null,"is_active":false}}`},
		{"nested objects where a string is expected",
			`{"name": {"z": 1, "a": {"y": 1E2, "b": [{"k": -0, "c": "<&>"}]}, "m": {}}}`,
			`{"type":"string_type","loc":["body","name"],"msg":"Input should be a valid string","input":{"z":1,"a":{"y":100.0,"b":[{"k":0,"c":"<&>"}]},"m":{}}}`},
		{"list items",
			`{"name": "a", "tags": ["ok", {"b": 1, "a": 2}, [{"d": 1, "c": 2}]]}`,
			`{"type":"string_type","loc":["body","tags",1],"msg":"Input should be a valid string","input":{"b":1,"a":2}}`},
		{"list items in lists",
			`{"name": "a", "tags": ["ok", [{"d": 1, "c": 2}]]}`,
			`{"type":"string_type","loc":["body","tags",1],"msg":"Input should be a valid string","input":[{"d":1,"c":2}]}`},
		{"duplicate keys: first position, last value",
			`{"system_prompt": 1, "is_active": true, "system_prompt": "p"}`,
			`{"type":"missing","loc":["body","name"],"msg":"Field required","input":{"system_prompt":"p","is_active":true}}`},
		{"nested duplicate keys",
			`{"name": {"b": 1, "a": {"y": 1, "x": 2, "y": 3}, "b": [4]}}`,
			`{"type":"string_type","loc":["body","name"],"msg":"Input should be a valid string","input":{"b":[4],"a":{"y":3,"x":2}}}`},
		{"body that is a list of objects",
			`[{"name": "a", "is_active": true}, {"b": {"d": 1, "c": 2}}]`,
			`{"type":"model_attributes_type","loc":["body"],"msg":"Input should be a valid dictionary or object to extract fields from","input":[{"name":"a","is_active":true},{"b":{"d":1,"c":2}}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs := DecodeBody([]byte(tt.body), agent)
			if got := detail(t, errs); got != tt.want {
				t.Errorf("errors\n got: %s\nwant: %s", got, tt.want)
			}
		})
	}
}

// TestDetailJSONKeepsRequestOrder checks the whole 422 body, and that the
// order survives when an Input is marshalled on its own.
func TestDetailJSONKeepsRequestOrder(t *testing.T) {
	s := Schema{Fields: []Field{{Name: "name", Kind: String, Required: true}}}
	_, errs := DecodeBody([]byte(`{"system_prompt": "<p>", "meta": {"b": 1.0, "a": "&"}}`), s)
	got, err := errs.DetailJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"detail":[{"type":"missing","loc":["body","name"],"msg":"Field required","input":{"system_prompt":"<p>","meta":{"b":1.0,"a":"&"}}}]}`
	if string(got) != want {
		t.Errorf("\n got: %s\nwant: %s", got, want)
	}

	input, err := json.Marshal(errs[0].Input)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"system_prompt":"\u003cp\u003e","meta":{"b":1.0,"a":"\u0026"}}`; string(input) != want {
		t.Errorf("json.Marshal(Input)\n got: %s\nwant: %s", input, want)
	}
}

// TestDecodedObjectsArePlainMaps checks that Values still hands out plain
// Go maps, however deeply objects are nested, with duplicate keys resolved.
func TestDecodedObjectsArePlainMaps(t *testing.T) {
	s := Schema{Fields: []Field{
		{Name: "meta", Kind: Object},
		{Name: "any", Kind: List},
		{Name: "objs", Kind: List, Elem: &Field{Kind: Object}},
	}}
	vals, errs := DecodeBody([]byte(`{
		"meta": {"b": {"d": [1, {"f": null, "e": true}]}, "a": 1, "a": 2},
		"any": [{"y": "1", "x": [{}]}, 3],
		"objs": [{"k": {"v": 1}}]
	}`), s)
	if errs != nil {
		t.Fatalf("unexpected errors: %v", errs)
	}
	meta, ok := vals.Object("meta")
	wantMeta := map[string]any{
		"a": json.Number("2"),
		"b": map[string]any{"d": []any{json.Number("1"), map[string]any{"f": nil, "e": true}}},
	}
	if !ok || !reflect.DeepEqual(meta, wantMeta) {
		t.Errorf("Object(meta) = %#v, %v; want %#v", meta, ok, wantMeta)
	}
	anyList, _ := vals.Value("any")
	wantAny := []any{map[string]any{"y": "1", "x": []any{map[string]any{}}}, json.Number("3")}
	if !reflect.DeepEqual(anyList, wantAny) {
		t.Errorf("Value(any) = %#v; want %#v", anyList, wantAny)
	}
	objs, _ := vals.Value("objs")
	wantObjs := []any{map[string]any{"k": map[string]any{"v": json.Number("1")}}}
	if !reflect.DeepEqual(objs, wantObjs) {
		t.Errorf("Value(objs) = %#v; want %#v", objs, wantObjs)
	}
}

// TestValidateWithPlainMap checks that Schema.Validate, given a plain map,
// still echoes it with sorted keys.
func TestValidateWithPlainMap(t *testing.T) {
	s := Schema{Fields: []Field{{Name: "name", Kind: String, Required: true}, {Name: "o", Kind: Object}}}
	vals, errs := s.Validate([]any{"body"}, map[string]any{"z": 1, "a": 2, "o": map[string]any{"k": "v"}})
	want := `{"type":"missing","loc":["body","name"],"msg":"Field required","input":{"a":2,"o":{"k":"v"},"z":1}}`
	if got := detail(t, errs); got != want {
		t.Errorf("errors\n got: %s\nwant: %s", got, want)
	}
	if o, ok := vals.Object("o"); !ok || o["k"] != "v" {
		t.Errorf("Object(o) = %v, %v", o, ok)
	}
}
