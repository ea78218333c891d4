package validation

import (
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Numeric coercions follow pydantic v2's lax mode for Python input: FastAPI
// validates what json.loads produced, so a JSON number with a fraction or
// exponent is a Python float and one without is a Python int.

// toNumber reports the literal of a numeric input and whether Python would
// hold it as a float. Besides json.Number it accepts the Go numbers a caller
// might put in a map handed to Schema.Validate.
func toNumber(v any) (lit string, isFloat bool, ok bool) {
	switch v := v.(type) {
	case json.Number:
		return string(v), isFloatLiteral(v), true
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return strconv.FormatFloat(v, 'g', -1, 64), true, true
		}
		return pyFloatRepr(v), true, true
	case float32:
		return toNumber(float64(v))
	case int:
		return strconv.Itoa(v), false, true
	case int64:
		return strconv.FormatInt(v, 10), false, true
	case int32:
		return strconv.FormatInt(int64(v), 10), false, true
	case uint64:
		return strconv.FormatUint(v, 10), false, true
	}
	return "", false, false
}

// floatToInt is pydantic's float_as_int: it returns the error type when the
// float is not an exact int64.
func floatToInt(f float64) (int64, string) {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return 0, "finite_number"
	case f != math.Trunc(f):
		return 0, "int_from_float"
	case f <= math.MinInt64 || f >= math.MaxInt64:
		return 0, "int_parsing_size"
	}
	return int64(f), ""
}

func validateInt(f *Field, loc []any, in any) (any, *ErrorItem) {
	var n *big.Int
	switch v := in.(type) {
	case bool:
		n = big.NewInt(0)
		if v {
			n.SetInt64(1)
		}
	case string:
		var typ string
		if n, typ = parseIntString(v); typ != "" {
			return nil, errorPtr(newError(typ, loc, in))
		}
	default:
		lit, isFloat, ok := toNumber(in)
		if !ok {
			return nil, errorPtr(newError("int_type", loc, in))
		}
		if isFloat {
			fl, _ := strconv.ParseFloat(lit, 64) // out of range gives ±Inf, as in Python
			i, typ := floatToInt(fl)
			if typ != "" {
				return nil, errorPtr(newError(typ, loc, in))
			}
			n = big.NewInt(i)
		} else if len(lit) > maxIntDigits {
			return nil, errorPtr(newError("int_parsing_size", loc, in))
		} else if n, ok = new(big.Int).SetString(lit, 10); !ok {
			return nil, errorPtr(newError("int_parsing", loc, in))
		}
	}
	return checkIntBounds(f, loc, in, n)
}

// maxIntDigits mirrors CPython's limit on int-from-string conversions, which
// also spares us quadratic big-number parsing of hostile inputs.
const maxIntDigits = 4300

// parseIntString is pydantic's str_as_int: surrounding whitespace, a sign,
// leading zeros, a ".0…" suffix and PEP 515 underscores are all accepted.
// It returns the error type on failure.
func parseIntString(s string) (*big.Int, string) {
	s = strings.TrimSpace(s)
	neg := false
	if rest, ok := strings.CutPrefix(s, "+"); ok {
		if strings.HasPrefix(rest, "-") {
			return nil, "int_parsing"
		}
		s = rest
	}
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		if strings.HasPrefix(rest, "-") || strings.HasPrefix(rest, "+") {
			return nil, "int_parsing"
		}
		s, neg = rest, true
	}
	if i := strings.IndexByte(s, '.'); i >= 0 {
		if frac := s[i+1:]; frac != "" && strings.Trim(frac, "0") == "" {
			s = s[:i]
		}
	}
	if strings.Contains(s, "_") {
		stripped, ok := stripUnderscores(s)
		if !ok {
			return nil, "int_parsing"
		}
		s = stripped
	}
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return nil, "int_parsing"
	}
	if len(s) > maxIntDigits {
		return nil, "int_parsing_size"
	}
	n, _ := new(big.Int).SetString(s, 10)
	if neg {
		n.Neg(n)
	}
	return n, ""
}

// stripUnderscores removes digit-group underscores, refusing leading,
// trailing or doubled ones as Python does.
func stripUnderscores(s string) (string, bool) {
	if !strings.Contains(s, "_") || strings.HasPrefix(s, "_") || strings.HasSuffix(s, "_") || strings.Contains(s, "__") {
		return "", false
	}
	return strings.ReplaceAll(s, "_", ""), true
}

var (
	maxInt64 = big.NewInt(math.MaxInt64)
	minInt64 = big.NewInt(math.MinInt64)
)

// checkIntBounds applies le then ge, as pydantic does, and then the int64
// range this API stores, reported with the same error types.
func checkIntBounds(f *Field, loc []any, in any, n *big.Int) (any, *ErrorItem) {
	if f.Le != nil && cmpIntFloat(n, *f.Le) > 0 {
		bound, text := boundNumber(*f.Le, f.Kind)
		return nil, errorPtr(boundError("less_than_equal", "le", loc, in, bound, text))
	}
	if n.Cmp(maxInt64) > 0 {
		s := maxInt64.String()
		return nil, errorPtr(boundError("less_than_equal", "le", loc, in, json.Number(s), s))
	}
	if f.Ge != nil && cmpIntFloat(n, *f.Ge) < 0 {
		bound, text := boundNumber(*f.Ge, f.Kind)
		return nil, errorPtr(boundError("greater_than_equal", "ge", loc, in, bound, text))
	}
	if n.Cmp(minInt64) < 0 {
		s := minInt64.String()
		return nil, errorPtr(boundError("greater_than_equal", "ge", loc, in, json.Number(s), s))
	}
	return n.Int64(), nil
}

// cmpIntFloat compares exactly, without rounding n to a float64.
func cmpIntFloat(n *big.Int, b float64) int {
	return new(big.Float).SetInt(n).Cmp(big.NewFloat(b))
}

func validateFloat(f *Field, loc []any, in any) (any, *ErrorItem) {
	var fl float64
	switch v := in.(type) {
	case bool:
		if v {
			fl = 1
		}
	case string:
		var ok bool
		if fl, ok = parseFloatString(v); !ok {
			return nil, errorPtr(newError("float_parsing", loc, in))
		}
	default:
		lit, _, ok := toNumber(in)
		if !ok {
			return nil, errorPtr(newError("float_type", loc, in))
		}
		fl, _ = strconv.ParseFloat(lit, 64) // overflow gives ±Inf, underflow 0, as in Python
	}
	// pydantic accepts inf and nan by default; this API only takes finite numbers.
	if math.IsNaN(fl) || math.IsInf(fl, 0) {
		return nil, errorPtr(newError("finite_number", loc, in))
	}
	if f.Le != nil && !(fl <= *f.Le) {
		bound, text := boundNumber(*f.Le, f.Kind)
		return nil, errorPtr(boundError("less_than_equal", "le", loc, in, bound, text))
	}
	if f.Ge != nil && !(fl >= *f.Ge) {
		bound, text := boundNumber(*f.Ge, f.Kind)
		return nil, errorPtr(boundError("greater_than_equal", "ge", loc, in, bound, text))
	}
	return fl, nil
}

// parseFloatString is pydantic's str_as_float: Rust's f64 grammar on the
// trimmed string, then a second try with PEP 515 underscores removed.
func parseFloatString(s string) (float64, bool) {
	if f, ok := parseRustFloat(strings.TrimSpace(s)); ok {
		return f, true
	}
	if stripped, ok := stripUnderscores(s); ok {
		return parseRustFloat(stripped)
	}
	return 0, false
}

// parseRustFloat accepts Rust's f64::from_str syntax:
// [+-]? (inf | infinity | nan | digits [. digits?] | . digits) ([eE] [+-]? digits)?
// It refuses the hex and underscore forms strconv.ParseFloat would allow.
func parseRustFloat(s string) (float64, bool) {
	body := strings.TrimLeft(s, "+-")
	if len(s)-len(body) > 1 {
		return 0, false
	}
	switch strings.ToLower(body) {
	case "inf", "infinity":
		if strings.HasPrefix(s, "-") {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	case "nan":
		return math.NaN(), true
	}
	mantissa, exp, hasExp := strings.Cut(strings.ToLower(body), "e")
	intPart, fracPart, _ := strings.Cut(mantissa, ".")
	if intPart+fracPart == "" || !allDigits(intPart) || !allDigits(fracPart) {
		return 0, false
	}
	if hasExp {
		exp = strings.TrimPrefix(strings.TrimPrefix(exp, "+"), "-")
		if exp == "" || !allDigits(exp) {
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !isRangeError(err) {
		return 0, false
	}
	return f, true
}

func allDigits(s string) bool {
	return strings.Trim(s, "0123456789") == ""
}

func isRangeError(err error) bool {
	var ne *strconv.NumError
	return errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange)
}

func validateBool(loc []any, in any) (any, *ErrorItem) {
	switch v := in.(type) {
	case bool:
		return v, nil
	case string:
		switch strings.ToLower(v) {
		case "0", "f", "n", "no", "off", "false":
			return false, nil
		case "1", "t", "y", "on", "yes", "true":
			return true, nil
		}
		return nil, errorPtr(newError("bool_parsing", loc, in))
	}
	lit, isFloat, ok := toNumber(in)
	if !ok {
		return nil, errorPtr(newError("bool_type", loc, in))
	}
	if isFloat {
		fl, _ := strconv.ParseFloat(lit, 64)
		if _, typ := floatToInt(fl); typ != "" {
			return nil, errorPtr(newError("bool_type", loc, in))
		}
		lit = strconv.FormatFloat(fl, 'f', 0, 64)
	}
	n, err := strconv.ParseInt(lit, 10, 64)
	switch {
	case err != nil:
		// pydantic goes through float_as_int here, which refuses anything beyond int64.
		return nil, errorPtr(newError("bool_type", loc, in))
	case n == 0:
		return false, nil
	case n == 1:
		return true, nil
	}
	return nil, errorPtr(newError("bool_parsing", loc, in))
}

// maxDecimalDigits bounds the plain-notation length of a decimal, so that
// "1e999999999" cannot make us print a billion zeros.
const maxDecimalDigits = 4300

func validateDecimal(f *Field, loc []any, in any) (any, *ErrorItem) {
	var text string
	switch v := in.(type) {
	case bool:
		return nil, errorPtr(newError("decimal_type", loc, in))
	case string:
		text = v
	default:
		lit, isFloat, ok := toNumber(in)
		if !ok {
			return nil, errorPtr(newError("decimal_type", loc, in))
		}
		if isFloat {
			// json.loads turns an out-of-range float into inf, which is not finite.
			if fl, _ := strconv.ParseFloat(lit, 64); math.IsInf(fl, 0) || math.IsNaN(fl) {
				return nil, errorPtr(newError("finite_number", loc, in))
			}
		}
		text = lit
	}
	canonical, typ := parseDecimal(text)
	if typ != "" {
		return nil, errorPtr(newError(typ, loc, in))
	}
	value, _ := new(big.Rat).SetString(canonical)
	if f.Le != nil && cmpDecimalBound(value, *f.Le) > 0 {
		bound, btext := boundNumber(*f.Le, f.Kind)
		return nil, errorPtr(boundError("less_than_equal", "le", loc, in, bound, btext))
	}
	if f.Ge != nil && cmpDecimalBound(value, *f.Ge) < 0 {
		bound, btext := boundNumber(*f.Ge, f.Kind)
		return nil, errorPtr(boundError("greater_than_equal", "ge", loc, in, bound, btext))
	}
	return canonical, nil
}

// cmpDecimalBound compares with a float bound read by its shortest decimal
// form, so that a bound of 0.1 means exactly 0.1 and not the binary float
// nearest to it.
func cmpDecimalBound(value *big.Rat, b float64) int {
	if math.IsInf(b, 0) {
		return -int(math.Copysign(1, b))
	}
	r, _ := new(big.Rat).SetString(strconv.FormatFloat(b, 'g', -1, 64))
	return value.Cmp(r)
}

// parseDecimal accepts Python's Decimal() string syntax (surrounding
// whitespace and underscores ignored) and returns the canonical plain form:
// no exponent, no leading or trailing zeros, "0" for zero. It returns the
// error type on failure: decimal_parsing, or finite_number for Infinity/NaN.
func parseDecimal(s string) (string, string) {
	s = strings.ReplaceAll(strings.TrimSpace(s), "_", "")
	neg := strings.HasPrefix(s, "-")
	body := strings.TrimLeft(s, "+-")
	if len(s)-len(body) > 1 {
		return "", "decimal_parsing"
	}
	lower := strings.ToLower(body)
	switch {
	case lower == "inf" || lower == "infinity":
		return "", "finite_number"
	case strings.HasPrefix(lower, "nan") && allDigits(lower[3:]),
		strings.HasPrefix(lower, "snan") && allDigits(lower[4:]):
		return "", "finite_number"
	}
	mantissa, expText, hasExp := strings.Cut(lower, "e")
	intPart, fracPart, _ := strings.Cut(mantissa, ".")
	if intPart+fracPart == "" || !allDigits(intPart) || !allDigits(fracPart) {
		return "", "decimal_parsing"
	}
	exp := 0
	if hasExp {
		digits := strings.TrimLeft(expText, "+-")
		if digits == "" || len(expText)-len(digits) > 1 || !allDigits(digits) {
			return "", "decimal_parsing"
		}
		e, err := strconv.Atoi(expText)
		if err != nil || e > maxDecimalDigits || e < -maxDecimalDigits {
			return "", "decimal_parsing"
		}
		exp = e
	}
	// value = coef × 10^exp
	coef := strings.TrimLeft(intPart+fracPart, "0")
	exp -= len(fracPart)
	trimmed := strings.TrimRight(coef, "0")
	exp += len(coef) - len(trimmed)
	coef = trimmed
	if coef == "" {
		return "0", ""
	}
	if len(coef) > maxDecimalDigits || exp > maxDecimalDigits || -exp > maxDecimalDigits {
		return "", "decimal_parsing"
	}
	var plain string
	switch {
	case exp >= 0:
		plain = coef + strings.Repeat("0", exp)
	case len(coef) > -exp:
		plain = coef[:len(coef)+exp] + "." + coef[len(coef)+exp:]
	default:
		plain = "0." + strings.Repeat("0", -exp-len(coef)) + coef
	}
	if neg {
		plain = "-" + plain
	}
	return plain, ""
}

func errorPtr(e ErrorItem) *ErrorItem { return &e }
