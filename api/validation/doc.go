// Package validation decodes request bodies, query and path values against a
// declarative schema and reports failures as FastAPI / pydantic v2 do (same
// error types, locations, messages, inputs and contexts), so clients of the
// former Python API see no difference. The same schema produces the OpenAPI
// 3.1 description, so documentation and validation cannot drift.
//
// Coercion follows pydantic's lax mode applied to what Python's json.loads
// (or Starlette's query parsing) produced: "5" is a valid integer, 5.0 too,
// 5.5 is not; "yes" is a valid boolean; numbers are never valid strings.
// Bodies are decoded by a parser that fails like CPython's json module, so
// json_invalid errors carry Python's reason and character offset.
//
// Deliberate differences from FastAPI:
//   - Integers must fit in int64; others get less_than_equal /
//     greater_than_equal with the int64 limit.
//   - Floats must be finite: "inf", "nan" and overflowing literals get
//     finite_number (pydantic accepts them by default).
//   - Dates and datetimes are strings only; Unix timestamps are refused.
//   - Decimal JSON numbers keep every digit (FastAPI goes through a float);
//     decimals longer than 4300 digits in plain notation are refused.
//   - JSON's NaN / Infinity literals are syntax errors, nesting stops at
//     1000 levels, and invalid UTF-8 is a json_invalid error (FastAPI
//     answers 400 or 500 to these). Trailing commas get Python 3.13's
//     "Illegal trailing comma" messages.
//   - A blank body, or a JSON null, is "missing" only when the schema has a
//     required field (FastAPI: always, and json_invalid for a blank body).
//   - Email checks cover email-validator's syntax rules except IDNA:
//     internationalized domains are only lower-cased.
//   - ValueError's ctx holds the text; FastAPI prints the exception as {}.
package validation
