package validation

import (
	"testing"
	"time"
)

func TestZeroValues(t *testing.T) {
	var v Values
	if v.Has("x") || v.IsNull("x") {
		t.Error("zero Values reports a field")
	}
	if _, ok := v.Int("x"); ok {
		t.Error("Int ok on zero Values")
	}
	if _, ok := v.Strings("x"); ok {
		t.Error("Strings ok on zero Values")
	}
	if _, ok := v.Value("x"); ok {
		t.Error("Value ok on zero Values")
	}
}

func TestValuesAccessors(t *testing.T) {
	s := Schema{Fields: []Field{
		{Name: "n", Kind: Int},
		{Name: "f", Kind: Float},
		{Name: "d", Kind: Decimal},
		{Name: "s", Kind: String},
		{Name: "e", Kind: Email},
		{Name: "b", Kind: Bool},
		{Name: "t", Kind: DateTime},
		{Name: "o", Kind: Object},
		{Name: "ids", Kind: List, Elem: &Field{Kind: Int}},
		{Name: "names", Kind: List, Elem: &Field{Kind: Enum, Enum: []string{"a", "b"}}},
		{Name: "maybe", Kind: List, Elem: &Field{Kind: String, Nullable: true}},
		{Name: "gone", Kind: Int, Nullable: true},
	}}
	v, errs := DecodeBody([]byte(`{"n": "7", "f": 2, "d": "0.50", "s": "x", "e": "A@B.CO", "b": "on",
		"t": "2024-05-06T07:08:09+02:00", "o": {}, "ids": [1, 2], "names": ["b"], "maybe": ["x", null], "gone": null}`), s)
	if errs != nil {
		t.Fatalf("unexpected errors: %v", errs)
	}
	if n, ok := v.Int("n"); !ok || n != 7 {
		t.Errorf("Int = %d, %v", n, ok)
	}
	if f, ok := v.Float("f"); !ok || f != 2 {
		t.Errorf("Float = %v, %v", f, ok)
	}
	if f, ok := v.Float("n"); !ok || f != 7 {
		t.Errorf("Float of an Int = %v, %v", f, ok)
	}
	if d, ok := v.Decimal("d"); !ok || d != "0.5" {
		t.Errorf("Decimal = %q, %v", d, ok)
	}
	if f, ok := v.Float("d"); !ok || f != 0.5 {
		t.Errorf("Float of a Decimal = %v, %v", f, ok)
	}
	if _, ok := v.String("d"); ok {
		t.Error("String ok for a Decimal")
	}
	if s, ok := v.String("e"); !ok || s != "A@b.co" {
		t.Errorf("String of an Email = %q, %v", s, ok)
	}
	if b, ok := v.Bool("b"); !ok || !b {
		t.Errorf("Bool = %v, %v", b, ok)
	}
	want := time.Date(2024, 5, 6, 5, 8, 9, 0, time.UTC)
	if tm, ok := v.Time("t"); !ok || !tm.Equal(want) {
		t.Errorf("Time = %v, %v", tm, ok)
	}
	if o, ok := v.Object("o"); !ok || len(o) != 0 {
		t.Errorf("Object = %v, %v", o, ok)
	}
	if ids, ok := v.Ints("ids"); !ok || len(ids) != 2 || ids[0] != 1 {
		t.Errorf("Ints = %v, %v", ids, ok)
	}
	if names, ok := v.Strings("names"); !ok || len(names) != 1 || names[0] != "b" {
		t.Errorf("Strings = %v, %v", names, ok)
	}
	if _, ok := v.Strings("maybe"); ok {
		t.Error("Strings ok for a list holding null")
	}
	if _, ok := v.Strings("ids"); ok {
		t.Error("Strings ok for a list of Int")
	}
	if !v.Has("gone") || !v.IsNull("gone") {
		t.Error("explicit null not recorded")
	}
	if _, ok := v.Int("gone"); ok {
		t.Error("Int ok for null")
	}
}
