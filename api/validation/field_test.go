package validation

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// detail renders errors the way the 422 response does, minus the wrapper.
func detail(t *testing.T, errs Errors) string {
	t.Helper()
	var buf bytes.Buffer
	for i, e := range errs {
		if i > 0 {
			buf.WriteByte(',')
		}
		b, err := e.MarshalJSON()
		if err != nil {
			t.Fatalf("MarshalJSON: %v", err)
		}
		buf.Write(b)
	}
	return buf.String()
}

// validateOne decodes {"x": raw} against a schema holding only f.
func validateOne(t *testing.T, f Field, raw string) (Values, string) {
	t.Helper()
	vals, errs := DecodeBody([]byte(`{"x": `+raw+`}`), Schema{Fields: []Field{f}})
	return vals, detail(t, errs)
}

// TestFieldErrorsMatchPydantic holds what FastAPI answers, item for item, for
// a body {"x": raw}: the expectations were produced by pydantic 2.13 (with
// email-validator 2.3) validating json.loads(body), as FastAPI does.
// The 1e400 inputs are the exception: Python holds inf, which Starlette
// refuses to serialize, so the literal is echoed instead.
func TestFieldErrorsMatchPydantic(t *testing.T) {
	tests := []struct {
		field Field
		cases []struct{ raw, want string }
	}{
		{Field{Name: "x", Kind: Int, Required: true}, []struct{ raw, want string }{
			{`"abc"`, `{"type":"int_parsing","loc":["body","x"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"abc"}`},
			{`""`, `{"type":"int_parsing","loc":["body","x"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":""}`},
			{`" "`, `{"type":"int_parsing","loc":["body","x"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":" "}`},
			{`"5.5"`, `{"type":"int_parsing","loc":["body","x"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"5.5"}`},
			{`"5."`, `{"type":"int_parsing","loc":["body","x"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"5."}`},
			{`"1__000"`, `{"type":"int_parsing","loc":["body","x"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"1__000"}`},
			{`"0x10"`, `{"type":"int_parsing","loc":["body","x"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"0x10"}`},
			{`"1e3"`, `{"type":"int_parsing","loc":["body","x"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"1e3"}`},
			{`5.5`, `{"type":"int_from_float","loc":["body","x"],"msg":"Input should be a valid integer, got a number with a fractional part","input":5.5}`},
			{`-0.5`, `{"type":"int_from_float","loc":["body","x"],"msg":"Input should be a valid integer, got a number with a fractional part","input":-0.5}`},
			{`1e400`, `{"type":"finite_number","loc":["body","x"],"msg":"Input should be a finite number","input":1e400}`},
			{`1e19`, `{"type":"int_parsing_size","loc":["body","x"],"msg":"Unable to parse input string as an integer, exceeded maximum size","input":1e+19}`},
			{`null`, `{"type":"int_type","loc":["body","x"],"msg":"Input should be a valid integer","input":null}`},
			{`[]`, `{"type":"int_type","loc":["body","x"],"msg":"Input should be a valid integer","input":[]}`},
			{`{"a":1}`, `{"type":"int_type","loc":["body","x"],"msg":"Input should be a valid integer","input":{"a":1}}`},
			{`"--5"`, `{"type":"int_parsing","loc":["body","x"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"--5"}`},
		}},
		{Field{Name: "x", Kind: Int, Required: true, Ge: Bound(1), Le: Bound(200)}, []struct{ raw, want string }{
			{`0`, `{"type":"greater_than_equal","loc":["body","x"],"msg":"Input should be greater than or equal to 1","input":0,"ctx":{"ge":1}}`},
			{`201`, `{"type":"less_than_equal","loc":["body","x"],"msg":"Input should be less than or equal to 200","input":201,"ctx":{"le":200}}`},
			{`"201"`, `{"type":"less_than_equal","loc":["body","x"],"msg":"Input should be less than or equal to 200","input":"201","ctx":{"le":200}}`},
			{`200.5`, `{"type":"int_from_float","loc":["body","x"],"msg":"Input should be a valid integer, got a number with a fractional part","input":200.5}`},
		}},
		{Field{Name: "x", Kind: Float, Required: true}, []struct{ raw, want string }{
			{`"abc"`, `{"type":"float_parsing","loc":["body","x"],"msg":"Input should be a valid number, unable to parse string as a number","input":"abc"}`},
			{`"inf"`, `{"type":"finite_number","loc":["body","x"],"msg":"Input should be a finite number","input":"inf"}`},
			{`"nan"`, `{"type":"finite_number","loc":["body","x"],"msg":"Input should be a finite number","input":"nan"}`},
			{`1e400`, `{"type":"finite_number","loc":["body","x"],"msg":"Input should be a finite number","input":1e400}`},
			{`"1__0"`, `{"type":"float_parsing","loc":["body","x"],"msg":"Input should be a valid number, unable to parse string as a number","input":"1__0"}`},
			{`"0x10"`, `{"type":"float_parsing","loc":["body","x"],"msg":"Input should be a valid number, unable to parse string as a number","input":"0x10"}`},
			{`"1,5"`, `{"type":"float_parsing","loc":["body","x"],"msg":"Input should be a valid number, unable to parse string as a number","input":"1,5"}`},
			{`"."`, `{"type":"float_parsing","loc":["body","x"],"msg":"Input should be a valid number, unable to parse string as a number","input":"."}`},
			{`null`, `{"type":"float_type","loc":["body","x"],"msg":"Input should be a valid number","input":null}`},
			{`[]`, `{"type":"float_type","loc":["body","x"],"msg":"Input should be a valid number","input":[]}`},
			{`{}`, `{"type":"float_type","loc":["body","x"],"msg":"Input should be a valid number","input":{}}`},
		}},
		{Field{Name: "x", Kind: Float, Required: true, Ge: Bound(0), Le: Bound(1)}, []struct{ raw, want string }{
			{`-0.1`, `{"type":"greater_than_equal","loc":["body","x"],"msg":"Input should be greater than or equal to 0","input":-0.1,"ctx":{"ge":0.0}}`},
			{`1.5`, `{"type":"less_than_equal","loc":["body","x"],"msg":"Input should be less than or equal to 1","input":1.5,"ctx":{"le":1.0}}`},
			{`"2"`, `{"type":"less_than_equal","loc":["body","x"],"msg":"Input should be less than or equal to 1","input":"2","ctx":{"le":1.0}}`},
		}},
		{Field{Name: "x", Kind: Float, Required: true, Ge: Bound(0.25), Le: Bound(1e-7)}, []struct{ raw, want string }{
			{`0.1`, `{"type":"less_than_equal","loc":["body","x"],"msg":"Input should be less than or equal to 0.0000001","input":0.1,"ctx":{"le":1e-07}}`},
		}},
		{Field{Name: "x", Kind: Bool, Required: true}, []struct{ raw, want string }{
			{`2`, `{"type":"bool_parsing","loc":["body","x"],"msg":"Input should be a valid boolean, unable to interpret input","input":2}`},
			{`-1`, `{"type":"bool_parsing","loc":["body","x"],"msg":"Input should be a valid boolean, unable to interpret input","input":-1}`},
			{`2.0`, `{"type":"bool_parsing","loc":["body","x"],"msg":"Input should be a valid boolean, unable to interpret input","input":2.0}`},
			{`0.5`, `{"type":"bool_type","loc":["body","x"],"msg":"Input should be a valid boolean","input":0.5}`},
			{`"maybe"`, `{"type":"bool_parsing","loc":["body","x"],"msg":"Input should be a valid boolean, unable to interpret input","input":"maybe"}`},
			{`""`, `{"type":"bool_parsing","loc":["body","x"],"msg":"Input should be a valid boolean, unable to interpret input","input":""}`},
			{`" true"`, `{"type":"bool_parsing","loc":["body","x"],"msg":"Input should be a valid boolean, unable to interpret input","input":" true"}`},
			{`"1.0"`, `{"type":"bool_parsing","loc":["body","x"],"msg":"Input should be a valid boolean, unable to interpret input","input":"1.0"}`},
			{`null`, `{"type":"bool_type","loc":["body","x"],"msg":"Input should be a valid boolean","input":null}`},
			{`[]`, `{"type":"bool_type","loc":["body","x"],"msg":"Input should be a valid boolean","input":[]}`},
			{`99999999999999999999`, `{"type":"bool_type","loc":["body","x"],"msg":"Input should be a valid boolean","input":99999999999999999999}`},
		}},
		{Field{Name: "x", Kind: String, Required: true}, []struct{ raw, want string }{
			{`5`, `{"type":"string_type","loc":["body","x"],"msg":"Input should be a valid string","input":5}`},
			{`5.5`, `{"type":"string_type","loc":["body","x"],"msg":"Input should be a valid string","input":5.5}`},
			{`true`, `{"type":"string_type","loc":["body","x"],"msg":"Input should be a valid string","input":true}`},
			{`null`, `{"type":"string_type","loc":["body","x"],"msg":"Input should be a valid string","input":null}`},
			{`[]`, `{"type":"string_type","loc":["body","x"],"msg":"Input should be a valid string","input":[]}`},
			{`{}`, `{"type":"string_type","loc":["body","x"],"msg":"Input should be a valid string","input":{}}`},
		}},
		{Field{Name: "x", Kind: String, Required: true, MinLength: 1, MaxLength: 3}, []struct{ raw, want string }{
			{`""`, `{"type":"string_too_short","loc":["body","x"],"msg":"String should have at least 1 character","input":"","ctx":{"min_length":1}}`},
			{`"abcd"`, `{"type":"string_too_long","loc":["body","x"],"msg":"String should have at most 3 characters","input":"abcd","ctx":{"max_length":3}}`},
			{`"😀😀😀😀"`, `{"type":"string_too_long","loc":["body","x"],"msg":"String should have at most 3 characters","input":"😀😀😀😀","ctx":{"max_length":3}}`},
		}},
		{Field{Name: "x", Kind: String, Required: true, MinLength: 3}, []struct{ raw, want string }{
			{`"ab"`, `{"type":"string_too_short","loc":["body","x"],"msg":"String should have at least 3 characters","input":"ab","ctx":{"min_length":3}}`},
		}},
		{Field{Name: "x", Kind: String, Required: true, MaxLength: 1}, []struct{ raw, want string }{
			{`"ab"`, `{"type":"string_too_long","loc":["body","x"],"msg":"String should have at most 1 character","input":"ab","ctx":{"max_length":1}}`},
		}},
		{Field{Name: "x", Kind: Enum, Required: true, Enum: []string{"accurate", "balanced", "creative", "custom"}}, []struct{ raw, want string }{
			{`"ACCURATE"`, `{"type":"enum","loc":["body","x"],"msg":"Input should be 'accurate', 'balanced', 'creative' or 'custom'","input":"ACCURATE","ctx":{"expected":"'accurate', 'balanced', 'creative' or 'custom'"}}`},
			{`5`, `{"type":"enum","loc":["body","x"],"msg":"Input should be 'accurate', 'balanced', 'creative' or 'custom'","input":5,"ctx":{"expected":"'accurate', 'balanced', 'creative' or 'custom'"}}`},
			{`null`, `{"type":"enum","loc":["body","x"],"msg":"Input should be 'accurate', 'balanced', 'creative' or 'custom'","input":null,"ctx":{"expected":"'accurate', 'balanced', 'creative' or 'custom'"}}`},
		}},
		{Field{Name: "x", Kind: Enum, Required: true, Enum: []string{"a", "it's"}}, []struct{ raw, want string }{
			{`"b"`, `{"type":"enum","loc":["body","x"],"msg":"Input should be 'a' or \"it's\"","input":"b","ctx":{"expected":"'a' or \"it's\""}}`},
		}},
		{Field{Name: "x", Kind: Literal, Required: true, Enum: []string{"cosine_similarity"}}, []struct{ raw, want string }{
			{`"cosine"`, `{"type":"literal_error","loc":["body","x"],"msg":"Input should be 'cosine_similarity'","input":"cosine","ctx":{"expected":"'cosine_similarity'"}}`},
			{`null`, `{"type":"literal_error","loc":["body","x"],"msg":"Input should be 'cosine_similarity'","input":null,"ctx":{"expected":"'cosine_similarity'"}}`},
		}},
		{Field{Name: "x", Kind: Decimal, Required: true}, []struct{ raw, want string }{
			{`"abc"`, `{"type":"decimal_parsing","loc":["body","x"],"msg":"Input should be a valid decimal","input":"abc"}`},
			{`""`, `{"type":"decimal_parsing","loc":["body","x"],"msg":"Input should be a valid decimal","input":""}`},
			{`"1e"`, `{"type":"decimal_parsing","loc":["body","x"],"msg":"Input should be a valid decimal","input":"1e"}`},
			{`"--1"`, `{"type":"decimal_parsing","loc":["body","x"],"msg":"Input should be a valid decimal","input":"--1"}`},
			{`"0x1"`, `{"type":"decimal_parsing","loc":["body","x"],"msg":"Input should be a valid decimal","input":"0x1"}`},
			{`"inf"`, `{"type":"finite_number","loc":["body","x"],"msg":"Input should be a finite number","input":"inf"}`},
			{`"NaN"`, `{"type":"finite_number","loc":["body","x"],"msg":"Input should be a finite number","input":"NaN"}`},
			{`1e400`, `{"type":"finite_number","loc":["body","x"],"msg":"Input should be a finite number","input":1e400}`},
			{`true`, `{"type":"decimal_type","loc":["body","x"],"msg":"Decimal input should be an integer, float, string or Decimal object","input":true}`},
			{`null`, `{"type":"decimal_type","loc":["body","x"],"msg":"Decimal input should be an integer, float, string or Decimal object","input":null}`},
			{`[]`, `{"type":"decimal_type","loc":["body","x"],"msg":"Decimal input should be an integer, float, string or Decimal object","input":[]}`},
		}},
		{Field{Name: "x", Kind: Decimal, Required: true, Ge: Bound(0.1), Le: Bound(2)}, []struct{ raw, want string }{
			{`"0.05"`, `{"type":"greater_than_equal","loc":["body","x"],"msg":"Input should be greater than or equal to 0.1","input":"0.05","ctx":{"ge":0.1}}`},
			{`"2.5"`, `{"type":"less_than_equal","loc":["body","x"],"msg":"Input should be less than or equal to 2","input":"2.5","ctx":{"le":2}}`},
			{`3`, `{"type":"less_than_equal","loc":["body","x"],"msg":"Input should be less than or equal to 2","input":3,"ctx":{"le":2}}`},
		}},
		{Field{Name: "x", Kind: Date, Required: true}, []struct{ raw, want string }{
			{`"abc"`, `{"type":"date_from_datetime_parsing","loc":["body","x"],"msg":"Input should be a valid date or datetime, input is too short","input":"abc","ctx":{"error":"input is too short"}}`},
			{`"2023-13-01"`, `{"type":"date_from_datetime_parsing","loc":["body","x"],"msg":"Input should be a valid date or datetime, month value is outside expected range of 1-12","input":"2023-13-01","ctx":{"error":"month value is outside expected range of 1-12"}}`},
			{`"2023-02-29"`, `{"type":"date_from_datetime_parsing","loc":["body","x"],"msg":"Input should be a valid date or datetime, day value is outside expected range","input":"2023-02-29","ctx":{"error":"day value is outside expected range"}}`},
			{`"0000-01-01"`, `{"type":"date_parsing","loc":["body","x"],"msg":"Input should be a valid date in the format YYYY-MM-DD, year 0 is out of range","input":"0000-01-01","ctx":{"error":"year 0 is out of range"}}`},
			{`"2023-01-01T10:00:00"`, `{"type":"date_from_datetime_inexact","loc":["body","x"],"msg":"Datetimes provided to dates should have zero time - e.g. be exact dates","input":"2023-01-01T10:00:00"}`},
			{`"2023-01-01x"`, "{\"type\":\"date_from_datetime_parsing\",\"loc\":[\"body\",\"x\"],\"msg\":\"Input should be a valid date or datetime, invalid datetime separator, expected `T`, `t`, `_` or space\",\"input\":\"2023-01-01x\",\"ctx\":{\"error\":\"invalid datetime separator, expected `T`, `t`, `_` or space\"}}"},
			{`"2023/01/01"`, "{\"type\":\"date_from_datetime_parsing\",\"loc\":[\"body\",\"x\"],\"msg\":\"Input should be a valid date or datetime, invalid date separator, expected `-`\",\"input\":\"2023/01/01\",\"ctx\":{\"error\":\"invalid date separator, expected `-`\"}}"},
			{`"2023-01-01T25:00"`, `{"type":"date_from_datetime_parsing","loc":["body","x"],"msg":"Input should be a valid date or datetime, hour value is outside expected range of 0-23","input":"2023-01-01T25:00","ctx":{"error":"hour value is outside expected range of 0-23"}}`},
			{`true`, `{"type":"date_type","loc":["body","x"],"msg":"Input should be a valid date","input":true}`},
			{`null`, `{"type":"date_type","loc":["body","x"],"msg":"Input should be a valid date","input":null}`},
		}},
		{Field{Name: "x", Kind: DateTime, Required: true}, []struct{ raw, want string }{
			{`"abc"`, `{"type":"datetime_from_date_parsing","loc":["body","x"],"msg":"Input should be a valid datetime or date, input is too short","input":"abc","ctx":{"error":"input is too short"}}`},
			{`"2023-01-01T25:00:00"`, `{"type":"datetime_from_date_parsing","loc":["body","x"],"msg":"Input should be a valid datetime or date, unexpected extra characters at the end of the input","input":"2023-01-01T25:00:00","ctx":{"error":"unexpected extra characters at the end of the input"}}`},
			{`"2023-01-01T10:20:30+24:00"`, `{"type":"datetime_from_date_parsing","loc":["body","x"],"msg":"Input should be a valid datetime or date, unexpected extra characters at the end of the input","input":"2023-01-01T10:20:30+24:00","ctx":{"error":"unexpected extra characters at the end of the input"}}`},
			{`"2023-01-01T10:20:30+05:60"`, `{"type":"datetime_from_date_parsing","loc":["body","x"],"msg":"Input should be a valid datetime or date, unexpected extra characters at the end of the input","input":"2023-01-01T10:20:30+05:60","ctx":{"error":"unexpected extra characters at the end of the input"}}`},
			{`"2023-01-01T10:20:30x"`, `{"type":"datetime_from_date_parsing","loc":["body","x"],"msg":"Input should be a valid datetime or date, unexpected extra characters at the end of the input","input":"2023-01-01T10:20:30x","ctx":{"error":"unexpected extra characters at the end of the input"}}`},
			{`"2023-01-01T10:20:30."`, `{"type":"datetime_from_date_parsing","loc":["body","x"],"msg":"Input should be a valid datetime or date, unexpected extra characters at the end of the input","input":"2023-01-01T10:20:30.","ctx":{"error":"unexpected extra characters at the end of the input"}}`},
			{`"2023-01-01T10-20"`, `{"type":"datetime_from_date_parsing","loc":["body","x"],"msg":"Input should be a valid datetime or date, unexpected extra characters at the end of the input","input":"2023-01-01T10-20","ctx":{"error":"unexpected extra characters at the end of the input"}}`},
			{`"2023-13-01"`, `{"type":"datetime_from_date_parsing","loc":["body","x"],"msg":"Input should be a valid datetime or date, month value is outside expected range of 1-12","input":"2023-13-01","ctx":{"error":"month value is outside expected range of 1-12"}}`},
			{`null`, `{"type":"datetime_type","loc":["body","x"],"msg":"Input should be a valid datetime","input":null}`},
			{`[]`, `{"type":"datetime_type","loc":["body","x"],"msg":"Input should be a valid datetime","input":[]}`},
		}},
		{Field{Name: "x", Kind: Object, Required: true}, []struct{ raw, want string }{
			{`[]`, `{"type":"dict_type","loc":["body","x"],"msg":"Input should be a valid dictionary","input":[]}`},
			{`"x"`, `{"type":"dict_type","loc":["body","x"],"msg":"Input should be a valid dictionary","input":"x"}`},
			{`null`, `{"type":"dict_type","loc":["body","x"],"msg":"Input should be a valid dictionary","input":null}`},
		}},
		{Field{Name: "x", Kind: List, Required: true, Elem: &Field{Kind: Int}}, []struct{ raw, want string }{
			{`"abc"`, `{"type":"list_type","loc":["body","x"],"msg":"Input should be a valid list","input":"abc"}`},
			{`{}`, `{"type":"list_type","loc":["body","x"],"msg":"Input should be a valid list","input":{}}`},
			{`null`, `{"type":"list_type","loc":["body","x"],"msg":"Input should be a valid list","input":null}`},
			{`[1, "2", "x", 3.5, null, true]`, `{"type":"int_parsing","loc":["body","x",2],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"x"}`},
			{`[1, 3.5]`, `{"type":"int_from_float","loc":["body","x",1],"msg":"Input should be a valid integer, got a number with a fractional part","input":3.5}`},
		}},
		{Field{Name: "x", Kind: List, Required: true, Elem: &Field{Kind: String, MaxLength: 2}}, []struct{ raw, want string }{
			{`["a", "abc", 5]`, `{"type":"string_too_long","loc":["body","x",1],"msg":"String should have at most 2 characters","input":"abc","ctx":{"max_length":2}}`},
			{`["a", 5]`, `{"type":"string_type","loc":["body","x",1],"msg":"Input should be a valid string","input":5}`},
		}},
		{Field{Name: "x", Kind: Email, Required: true}, []struct{ raw, want string }{
			{`"a"`, `{"type":"value_error","loc":["body","x"],"msg":"value is not a valid email address: An email address must have an @-sign.","input":"a","ctx":{"reason":"An email address must have an @-sign."}}`},
			{`"@x.com"`, `{"type":"value_error","loc":["body","x"],"msg":"value is not a valid email address: There must be something before the @-sign.","input":"@x.com","ctx":{"reason":"There must be something before the @-sign."}}`},
			{`"a@"`, `{"type":"value_error","loc":["body","x"],"msg":"value is not a valid email address: There must be something after the @-sign.","input":"a@","ctx":{"reason":"There must be something after the @-sign."}}`},
			{`"a@b"`, `{"type":"value_error","loc":["body","x"],"msg":"value is not a valid email address: The part after the @-sign is not valid. It should have a period.","input":"a@b","ctx":{"reason":"The part after the @-sign is not valid. It should have a period."}}`},
			{`"a b@c.com"`, `{"type":"value_error","loc":["body","x"],"msg":"value is not a valid email address: The email address contains invalid characters before the @-sign: SPACE.","input":"a b@c.com","ctx":{"reason":"The email address contains invalid characters before the @-sign: SPACE."}}`},
			{`"a@b.local"`, `{"type":"value_error","loc":["body","x"],"msg":"value is not a valid email address: The part after the @-sign is a special-use or reserved name that cannot be used with email.","input":"a@b.local","ctx":{"reason":"The part after the @-sign is a special-use or reserved name that cannot be used with email."}}`},
			{`"a..b@x.com"`, `{"type":"value_error","loc":["body","x"],"msg":"value is not a valid email address: An email address cannot have two periods in a row.","input":"a..b@x.com","ctx":{"reason":"An email address cannot have two periods in a row."}}`},
			{`".a@x.com"`, `{"type":"value_error","loc":["body","x"],"msg":"value is not a valid email address: An email address cannot start with a period.","input":".a@x.com","ctx":{"reason":"An email address cannot start with a period."}}`},
			{`"a.@x.com"`, `{"type":"value_error","loc":["body","x"],"msg":"value is not a valid email address: An email address cannot have a period immediately before the @-sign.","input":"a.@x.com","ctx":{"reason":"An email address cannot have a period immediately before the @-sign."}}`},
			{`"a@-x.com"`, `{"type":"value_error","loc":["body","x"],"msg":"value is not a valid email address: An email address cannot have a hyphen immediately after the @-sign.","input":"a@-x.com","ctx":{"reason":"An email address cannot have a hyphen immediately after the @-sign."}}`},
			{`"a@x.com."`, `{"type":"value_error","loc":["body","x"],"msg":"value is not a valid email address: An email address cannot end with a period.","input":"a@x.com.","ctx":{"reason":"An email address cannot end with a period."}}`},
			{`"ab\u00a0c@x.com"`, `{"type":"value_error","loc":["body","x"],"msg":"value is not a valid email address: The email address contains unsafe characters: NO-BREAK SPACE.","input":"ab c@x.com","ctx":{"reason":"The email address contains unsafe characters: NO-BREAK SPACE."}}`},
			{`"a@b_c.com"`, `{"type":"value_error","loc":["body","x"],"msg":"value is not a valid email address: The part after the @-sign contains invalid characters: '_'.","input":"a@b_c.com","ctx":{"reason":"The part after the @-sign contains invalid characters: '_'."}}`},
			{`"\"a b\"@x.com"`, `{"type":"value_error","loc":["body","x"],"msg":"value is not a valid email address: Quoting the part before the @-sign is not allowed here.","input":"\"a b\"@x.com","ctx":{"reason":"Quoting the part before the @-sign is not allowed here."}}`},
			{`"a<b@x.com"`, `{"type":"value_error","loc":["body","x"],"msg":"value is not a valid email address: An open angle bracket at the start of the email address has to be followed by a close angle bracket at the end.","input":"a<b@x.com","ctx":{"reason":"An open angle bracket at the start of the email address has to be followed by a close angle bracket at the end."}}`},
			{`"a@ab--cd.com"`, `{"type":"value_error","loc":["body","x"],"msg":"value is not a valid email address: An email address cannot have two letters followed by two dashes immediately after the @-sign or after a period, except Punycode.","input":"a@ab--cd.com","ctx":{"reason":"An email address cannot have two letters followed by two dashes immediately after the @-sign or after a period, except Punycode."}}`},
			{`"a(b)@x.com"`, `{"type":"value_error","loc":["body","x"],"msg":"value is not a valid email address: The email address contains invalid characters before the @-sign: '(', ')'.","input":"a(b)@x.com","ctx":{"reason":"The email address contains invalid characters before the @-sign: '(', ')'."}}`},
			{`"a＠b.com"`, `{"type":"value_error","loc":["body","x"],"msg":"value is not a valid email address: The email address has the \"full-width\" at-sign (@) character instead of a regular at-sign.","input":"a＠b.com","ctx":{"reason":"The email address has the \"full-width\" at-sign (@) character instead of a regular at-sign."}}`},
			{`5`, `{"type":"string_type","loc":["body","x"],"msg":"Input should be a valid string","input":5}`},
			{`null`, `{"type":"string_type","loc":["body","x"],"msg":"Input should be a valid string","input":null}`},
		}},
	}
	for _, tt := range tests {
		for _, c := range tt.cases {
			t.Run(tt.field.Kind.String()+"/"+c.raw, func(t *testing.T) {
				vals, got := validateOne(t, tt.field, c.raw)
				if got != c.want {
					t.Errorf("errors\n got: %s\nwant: %s", got, c.want)
				}
				if vals.Has("x") {
					t.Errorf("invalid field recorded in Values")
				}
			})
		}
	}
}

// TestFieldErrorsBeyondPydantic covers the places where this package
// deliberately differs from pydantic; see the package documentation.
func TestFieldErrorsBeyondPydantic(t *testing.T) {
	intField := Field{Name: "x", Kind: Int, Required: true}
	tests := []struct {
		name  string
		field Field
		raw   string
		want  string
	}{
		{"int above int64", intField, `9223372036854775808`,
			`{"type":"less_than_equal","loc":["body","x"],"msg":"Input should be less than or equal to 9223372036854775807","input":9223372036854775808,"ctx":{"le":9223372036854775807}}`},
		{"int below int64", intField, `-9223372036854775809`,
			`{"type":"greater_than_equal","loc":["body","x"],"msg":"Input should be greater than or equal to -9223372036854775808","input":-9223372036854775809,"ctx":{"ge":-9223372036854775808}}`},
		{"huge int string", intField, `"99999999999999999999"`,
			`{"type":"less_than_equal","loc":["body","x"],"msg":"Input should be less than or equal to 9223372036854775807","input":"99999999999999999999","ctx":{"le":9223372036854775807}}`},
		{"huge int with a tighter bound", Field{Name: "x", Kind: Int, Le: Bound(200)}, `99999999999999999999`,
			`{"type":"less_than_equal","loc":["body","x"],"msg":"Input should be less than or equal to 200","input":99999999999999999999,"ctx":{"le":200}}`},
		{"float too large for int", intField, `1e19`,
			`{"type":"int_parsing_size","loc":["body","x"],"msg":"Unable to parse input string as an integer, exceeded maximum size","input":1e+19}`},
		{"timestamp for date", Field{Name: "x", Kind: Date}, `5`,
			`{"type":"date_type","loc":["body","x"],"msg":"Input should be a valid date","input":5}`},
		{"timestamp for datetime", Field{Name: "x", Kind: DateTime}, `1700000000`,
			`{"type":"datetime_type","loc":["body","x"],"msg":"Input should be a valid datetime","input":1700000000}`},
		{"float infinity string", Field{Name: "x", Kind: Float}, `"-Infinity"`,
			`{"type":"finite_number","loc":["body","x"],"msg":"Input should be a finite number","input":"-Infinity"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, got := validateOne(t, tt.field, tt.raw); got != tt.want {
				t.Errorf("errors\n got: %s\nwant: %s", got, tt.want)
			}
		})
	}
}

func TestCoercions(t *testing.T) {
	plus2 := time.FixedZone("", 2*3600)
	minus530 := time.FixedZone("", -(5*3600 + 30*60))
	tests := []struct {
		kind  Kind
		extra func(*Field)
		raw   string
		want  any
	}{
		{Int, nil, `5`, int64(5)},
		{Int, nil, `-0`, int64(0)},
		{Int, nil, `5.0`, int64(5)},
		{Int, nil, `1E2`, int64(100)},
		{Int, nil, `true`, int64(1)},
		{Int, nil, `false`, int64(0)},
		{Int, nil, `"5"`, int64(5)},
		{Int, nil, `" -5 \n"`, int64(-5)},
		{Int, nil, `"+5"`, int64(5)},
		{Int, nil, `"007"`, int64(7)},
		{Int, nil, `"5.00"`, int64(5)},
		{Int, nil, `"1_000"`, int64(1000)},
		{Int, nil, `9223372036854775807`, int64(math.MaxInt64)},
		{Int, nil, `"-9223372036854775808"`, int64(math.MinInt64)},
		{Int, func(f *Field) { f.Ge, f.Le = Bound(1), Bound(200) }, `200`, int64(200)},
		{Float, nil, `5`, 5.0},
		{Float, nil, `5.5`, 5.5},
		{Float, nil, `true`, 1.0},
		{Float, nil, `" 5.5 "`, 5.5},
		{Float, nil, `"1_000.5"`, 1000.5},
		{Float, nil, `".5"`, 0.5},
		{Float, nil, `"5."`, 5.0},
		{Float, nil, `"1E5"`, 1e5},
		{Float, nil, `1e-400`, 0.0},
		{Bool, nil, `true`, true},
		{Bool, nil, `0`, false},
		{Bool, nil, `1.0`, true},
		{Bool, nil, `"YES"`, true},
		{Bool, nil, `"off"`, false},
		{Bool, nil, `"t"`, true},
		{Bool, nil, `"N"`, false},
		{String, nil, `"héllo 😀"`, "héllo 😀"},
		{String, func(f *Field) { f.MaxLength = 3 }, `"😀😀😀"`, "😀😀😀"},
		{Email, nil, `"Jane.Doe@Example.COM"`, "Jane.Doe@example.com"},
		{Email, nil, `" a@b.co "`, "a@b.co"},
		{Email, nil, `"Jane Doe <jane@Example.com>"`, "jane@example.com"},
		{Email, nil, `"Info@X.com"`, "info@x.com"},
		{Email, nil, `"José@Bücher.DE"`, "José@bücher.de"},
		{Enum, func(f *Field) { f.Enum = []string{"a", "b"} }, `"b"`, "b"},
		{Literal, func(f *Field) { f.Enum = []string{"cosine_similarity"} }, `"cosine_similarity"`, "cosine_similarity"},
		{Decimal, nil, `0.25`, "0.25"},
		{Decimal, nil, `1`, "1"},
		{Decimal, nil, `1.0`, "1"},
		{Decimal, nil, `1e2`, "100"},
		{Decimal, nil, `1E-7`, "0.0000001"},
		{Decimal, nil, `-0.0`, "0"},
		{Decimal, nil, `12345678901234567890.123456789`, "12345678901234567890.123456789"},
		{Decimal, nil, `"00012.3400"`, "12.34"},
		{Decimal, nil, `" -1_000.5 "`, "-1000.5"},
		{Decimal, nil, `".5"`, "0.5"},
		{Decimal, func(f *Field) { f.Ge, f.Le = Bound(0.1), Bound(2) }, `"0.1"`, "0.1"},
		{Date, nil, `"2024-02-29"`, time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC)},
		{Date, nil, `"2023-01-01T00:00:00+05:00"`, time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)},
		{DateTime, nil, `"2023-01-01T10:20:30Z"`, time.Date(2023, 1, 1, 10, 20, 30, 0, time.UTC)},
		{DateTime, nil, `"2023-01-01 10:20"`, time.Date(2023, 1, 1, 10, 20, 0, 0, time.UTC)},
		{DateTime, nil, `"2023-01-01T10:20:30.123456789+02:00"`, time.Date(2023, 1, 1, 10, 20, 30, 123456000, plus2)},
		{DateTime, nil, `"2023-01-01t10:20:30,5-0530"`, time.Date(2023, 1, 1, 10, 20, 30, 500000000, minus530)},
		{DateTime, nil, `"2023-01-01"`, time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Object, nil, `{"a": [1, 2.5], "b": null}`, map[string]any{"a": []any{json.Number("1"), json.Number("2.5")}, "b": nil}},
		{List, func(f *Field) { f.Elem = &Field{Kind: Int} }, `[1, "2", 3.0]`, []any{int64(1), int64(2), int64(3)}},
		{List, func(f *Field) { f.Elem = &Field{Kind: Int, Nullable: true} }, `[1, null]`, []any{int64(1), nil}},
		{List, nil, `[1, "a"]`, []any{json.Number("1"), "a"}},
	}
	for _, tt := range tests {
		t.Run(tt.kind.String()+"/"+tt.raw, func(t *testing.T) {
			f := Field{Name: "x", Kind: tt.kind, Required: true}
			if tt.extra != nil {
				tt.extra(&f)
			}
			vals, errs := validateOne(t, f, tt.raw)
			if errs != "" {
				t.Fatalf("unexpected errors: %s", errs)
			}
			got, ok := vals.Value("x")
			if !ok {
				t.Fatal("value not recorded")
			}
			if wantTime, isTime := tt.want.(time.Time); isTime {
				gotTime, _ := got.(time.Time)
				_, gotOffset := gotTime.Zone()
				_, wantOffset := wantTime.Zone()
				if !gotTime.Equal(wantTime) || gotOffset != wantOffset {
					t.Errorf("got %v, want %v", got, wantTime)
				}
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestNullable(t *testing.T) {
	for _, kind := range []Kind{Int, Float, String, Bool, Email, Enum, Literal, Decimal, Date, DateTime, Object, List} {
		t.Run(kind.String(), func(t *testing.T) {
			f := Field{Name: "x", Kind: kind, Required: true, Nullable: true, Enum: []string{"a"}}
			vals, errs := validateOne(t, f, `null`)
			if errs != "" {
				t.Fatalf("unexpected errors: %s", errs)
			}
			if !vals.Has("x") || !vals.IsNull("x") {
				t.Errorf("null not recorded: Has=%v IsNull=%v", vals.Has("x"), vals.IsNull("x"))
			}
			if _, ok := vals.Value("x"); ok {
				t.Error("Value reports ok for a null")
			}
		})
	}
}

// TestNonNullableNull checks that null gets each kind's own type error.
func TestNonNullableNull(t *testing.T) {
	want := map[Kind]string{
		Int: "int_type", Float: "float_type", String: "string_type", Bool: "bool_type",
		Email: "string_type", Enum: "enum", Literal: "literal_error", Decimal: "decimal_type",
		Date: "date_type", DateTime: "datetime_type", Object: "dict_type", List: "list_type",
	}
	for kind, typ := range want {
		t.Run(kind.String(), func(t *testing.T) {
			_, errs := DecodeBody([]byte(`{"x": null}`), Schema{Fields: []Field{{Name: "x", Kind: kind, Enum: []string{"a"}}}})
			if len(errs) != 1 || errs[0].Type != typ || errs[0].Input != nil {
				t.Errorf("got %s, want one %s error with input null", detail(t, errs), typ)
			}
		})
	}
}

// A list reports only its first bad element (pydantic reports each): the
// answer to a list of 100 000 bad items stays one item long.
func TestListReportsItsFirstBadElement(t *testing.T) {
	f := Field{Name: "model_names", Kind: List, Required: true, Elem: &Field{Kind: String, MinLength: 1}}
	_, errs := DecodeBody([]byte(`{"model_names": ["ok", 1, "", null]}`), Schema{Fields: []Field{f}})
	want := `{"type":"string_type","loc":["body","model_names",1],"msg":"Input should be a valid string","input":1}`
	if got := detail(t, errs); got != want {
		t.Errorf("errors\n got: %s\nwant: %s", got, want)
	}
}

// Lists and objects past MaxItems get pydantic's too_long before any item
// is looked at.
func TestCollectionsTooLong(t *testing.T) {
	list := Field{Name: "ids", Kind: List, Required: true, MaxItems: 2, Elem: &Field{Kind: Int}}
	one := Field{Name: "one", Kind: List, MaxItems: 1}
	obj := Field{Name: "params", Kind: Object, MaxItems: 2}
	schema := Schema{Fields: []Field{list, one, obj}}
	_, errs := DecodeBody([]byte(`{"ids": ["x", "y", "z"], "one": [1, 2], "params": {"a": 1, "b": 2, "c": 3}}`), schema)
	want := strings.Join([]string{
		`{"type":"too_long","loc":["body","ids"],"msg":"List should have at most 2 items after validation, not 3","input":["x","y","z"],"ctx":{"field_type":"List","max_length":2,"actual_length":3}}`,
		`{"type":"too_long","loc":["body","one"],"msg":"List should have at most 1 item after validation, not 2","input":[1,2],"ctx":{"field_type":"List","max_length":1,"actual_length":2}}`,
		`{"type":"too_long","loc":["body","params"],"msg":"Dictionary should have at most 2 items after validation, not 3","input":{"a":1,"b":2,"c":3},"ctx":{"field_type":"Dictionary","max_length":2,"actual_length":3}}`,
	}, ",")
	if got := detail(t, errs); got != want {
		t.Errorf("errors\n got: %s\nwant: %s", got, want)
	}
	if _, errs := DecodeBody([]byte(`{"ids": [1, 2], "one": [1], "params": {"a": 1, "b": 2}}`), schema); len(errs) != 0 {
		t.Errorf("collections at their bounds refused: %s", detail(t, errs))
	}
}

// An echoed input is cut: long strings, long lists and objects, deep nesting.
func TestEchoedInputIsCut(t *testing.T) {
	long := strings.Repeat("é", MaxInputChars+5)
	items := make([]any, 30)
	for i := range items {
		items[i] = strings.Repeat("x", 500)
	}
	errs := Errors{
		newError("string_type", []any{"body", "a"}, long),
		newError("string_type", []any{"body", "b"}, items),
		newError("string_type", []any{"body", "c"}, []any{[]any{[]any{[]any{[]any{"deep"}}}}}),
	}
	got, err := errs.DetailJSON()
	if err != nil {
		t.Fatal(err)
	}
	short := strings.Repeat("x", MaxNestedInputChars) + "..."
	want := `{"detail":[` +
		`{"type":"string_type","loc":["body","a"],"msg":"Input should be a valid string","input":"` + strings.Repeat("é", MaxInputChars) + `..."},` +
		`{"type":"string_type","loc":["body","b"],"msg":"Input should be a valid string","input":["` + strings.Repeat(short+`","`, MaxInputItems) + `..."]},` +
		`{"type":"string_type","loc":["body","c"],"msg":"Input should be a valid string","input":[[[["..."]]]]}]}`
	if string(got) != want {
		t.Errorf("\n got: %s\nwant: %s", got, want)
	}
	many := make(Errors, 3*MaxErrorItems)
	for i := range many {
		many[i] = newError("string_type", []any{"body", i}, 1)
	}
	body, _ := many.DetailJSON()
	if n := strings.Count(string(body), `"type"`); n != MaxErrorItems {
		t.Errorf("%d items listed, want %d", n, MaxErrorItems)
	}
}
