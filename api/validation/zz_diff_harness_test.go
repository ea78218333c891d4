package validation

// TEMPORARY differential harness; removed before handing over.

import (
	"encoding/json"
	"os"
	"testing"
)

type diffSpec struct {
	Name      string    `json:"name"`
	Kind      string    `json:"kind"`
	Required  bool      `json:"required"`
	Nullable  bool      `json:"nullable"`
	Elem      *diffSpec `json:"elem"`
	Enum      []string  `json:"enum"`
	Ge        *float64  `json:"ge"`
	Le        *float64  `json:"le"`
	MinLength int       `json:"minLength"`
	MaxLength int       `json:"maxLength"`
}

func (s diffSpec) field() Field {
	f := Field{Name: s.Name, Required: s.Required, Nullable: s.Nullable, Enum: s.Enum, Ge: s.Ge, Le: s.Le, MinLength: s.MinLength, MaxLength: s.MaxLength}
	for k, n := range kindNames {
		if n == s.Kind {
			f.Kind = k
		}
	}
	if s.Elem != nil {
		e := s.Elem.field()
		f.Elem = &e
	}
	return f
}

func TestDiffHarness(t *testing.T) {
	in := os.Getenv("DIFF_CASES")
	if in == "" {
		t.Skip()
	}
	var cases []struct {
		Fields []diffSpec `json:"fields"`
		Body   string     `json:"body"`
	}
	data, _ := os.ReadFile(in)
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	var out []json.RawMessage
	for _, c := range cases {
		var s Schema
		for _, f := range c.Fields {
			s.Fields = append(s.Fields, f.field())
		}
		_, errs := DecodeBody([]byte(c.Body), s)
		if errs == nil {
			errs = Errors{}
		}
		b, err := json.Marshal(errs)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	b, _ := json.Marshal(out)
	os.WriteFile(os.Getenv("DIFF_OUT"), b, 0o644)
}
