package validation

import "time"

// Dates and datetimes are parsed like speedate, the parser behind pydantic v2,
// so the reasons appended to parsing errors ("input is too short", "month
// value is outside expected range of 1-12", ...) are the same. Unlike pydantic,
// Unix timestamps (numbers or numeric strings) are not accepted.

// Reasons, from speedate's ParseError documentation strings.
const (
	reasonTooShort        = "input is too short"
	reasonExtraCharacters = "unexpected extra characters at the end of the input"
	reasonDateTimeSep     = "invalid datetime separator, expected `T`, `t`, `_` or space"
	reasonDateSep         = "invalid date separator, expected `-`"
	reasonCharYear        = "invalid character in year"
	reasonCharMonth       = "invalid character in month"
	reasonCharDay         = "invalid character in day"
	reasonTimeSep         = "invalid time separator, expected `:`"
	reasonCharHour        = "invalid character in hour"
	reasonCharMinute      = "invalid character in minute"
	reasonCharSecond      = "invalid character in second"
	reasonTzSign          = "invalid timezone sign"
	reasonTzHour          = "invalid timezone hour"
	reasonTzMinute        = "invalid timezone minute"
	reasonRangeTzMinute   = "timezone minute value is outside expected range of 0-59"
	reasonRangeTz         = "timezone offset must be less than 24 hours"
	reasonRangeMonth      = "month value is outside expected range of 1-12"
	reasonRangeDay        = "day value is outside expected range"
	reasonRangeHour       = "hour value is outside expected range of 0-23"
	reasonRangeMinute     = "minute value is outside expected range of 0-59"
	reasonRangeSecond     = "second value is outside expected range of 0-59"
	reasonFractionMissing = "second fraction digits missing after `.`"
	// Not speedate's: Python's own, when a date of year 0 is made.
	reasonYearZero = "year 0 is out of range"
)

const (
	maxFractionDigitsParsed = 6 // microseconds; further digits are ignored
	nanosecondsPerMicrosec  = 1_000
)

// civilDate is a calendar date without a zone.
type civilDate struct{ year, month, day int }

// civilDateTime is a parsed datetime; offset is nil when the input had none.
type civilDateTime struct {
	date                 civilDate
	hour, minute, second int
	microsecond          int
	offset               *int // seconds east of UTC
}

// digitAt returns the decimal digit at s[i], or false when there is none.
func digitAt(s string, i int) (int, bool) {
	if i >= len(s) || s[i] < '0' || s[i] > '9' {
		return 0, false
	}
	return int(s[i] - '0'), true
}

// digits2 reads two digits at s[i:i+2].
func digits2(s string, i int) (int, bool) {
	a, ok1 := digitAt(s, i)
	b, ok2 := digitAt(s, i+1)
	return a*10 + b, ok1 && ok2
}

// parseDatePrefix reads YYYY-MM-DD from the first ten bytes (Date::parse_bytes_partial).
func parseDatePrefix(s string) (civilDate, string) {
	if len(s) < 10 {
		return civilDate{}, reasonTooShort
	}
	year := 0
	for i := range 4 {
		d, ok := digitAt(s, i)
		if !ok {
			return civilDate{}, reasonCharYear
		}
		year = year*10 + d
	}
	if s[4] != '-' {
		return civilDate{}, reasonDateSep
	}
	month, ok := digits2(s, 5)
	if !ok {
		return civilDate{}, reasonCharMonth
	}
	if s[7] != '-' {
		return civilDate{}, reasonDateSep
	}
	day, ok := digits2(s, 8)
	if !ok {
		return civilDate{}, reasonCharDay
	}
	var maxDay int
	switch month {
	case 1, 3, 5, 7, 8, 10, 12:
		maxDay = 31
	case 4, 6, 9, 11:
		maxDay = 30
	case 2:
		maxDay = 28
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			maxDay = 29
		}
	default:
		return civilDate{}, reasonRangeMonth
	}
	if day < 1 || day > maxDay {
		return civilDate{}, reasonRangeDay
	}
	return civilDate{year, month, day}, ""
}

// parseDate reads exactly YYYY-MM-DD (Date::parse_bytes_rfc3339).
func parseDate(s string) (civilDate, string) {
	d, reason := parseDatePrefix(s)
	if reason == "" && len(s) > 10 {
		return civilDate{}, reasonExtraCharacters
	}
	return d, reason
}

// parseDateTime reads YYYY-MM-DD[T t _ space]HH:MM[:SS[.ffffff]][Z|±HH[:]MM]
// (DateTime::parse_bytes_rfc3339). Fraction digits beyond microseconds are
// dropped, as pydantic's default "truncate" mode does.
func parseDateTime(s string) (civilDateTime, string) {
	var dt civilDateTime
	var reason string
	if dt.date, reason = parseDatePrefix(s); reason != "" {
		return dt, reason
	}
	if len(s) < 11 || (s[10] != 'T' && s[10] != 't' && s[10] != ' ' && s[10] != '_') {
		return dt, reasonDateTimeSep
	}
	pos, reason := parseClock(s, 11, &dt)
	if reason != "" {
		return dt, reason
	}
	if pos, reason = parseOffset(s, pos, &dt); reason != "" {
		return dt, reason
	}
	if len(s) > pos {
		return dt, reasonExtraCharacters
	}
	return dt, ""
}

// parseClock reads HH:MM[:SS[.f…]] at s[off:] and returns the index after it.
func parseClock(s string, off int, dt *civilDateTime) (int, string) {
	if len(s)-off < 5 {
		return 0, reasonTooShort
	}
	var ok bool
	if dt.hour, ok = digits2(s, off); !ok {
		return 0, reasonCharHour
	}
	if s[off+2] != ':' {
		return 0, reasonTimeSep
	}
	if dt.minute, ok = digits2(s, off+3); !ok {
		return 0, reasonCharMinute
	}
	if dt.hour > 23 {
		return 0, reasonRangeHour
	}
	if dt.minute > 59 {
		return 0, reasonRangeMinute
	}
	pos := off + 5
	if pos >= len(s) || s[pos] != ':' {
		return pos, ""
	}
	if dt.second, ok = digits2(s, pos+1); !ok {
		return 0, reasonCharSecond
	}
	if dt.second > 59 {
		return 0, reasonRangeSecond
	}
	pos += 3
	if pos >= len(s) || (s[pos] != '.' && s[pos] != ',') {
		return pos, ""
	}
	pos++
	n := 0
	for ; pos < len(s) && s[pos] >= '0' && s[pos] <= '9'; pos++ {
		if n < maxFractionDigitsParsed {
			dt.microsecond = dt.microsecond*10 + int(s[pos]-'0')
		}
		n++
	}
	if n == 0 {
		return 0, reasonFractionMissing
	}
	for i := n; i < maxFractionDigitsParsed; i++ {
		dt.microsecond *= 10
	}
	return pos, ""
}

// parseOffset reads an optional Z / ±HH:MM / ±HHMM (also U+2212 minus) at s[pos:].
func parseOffset(s string, pos int, dt *civilDateTime) (int, string) {
	if pos >= len(s) {
		return pos, ""
	}
	c := s[pos]
	pos++
	if c == 'Z' || c == 'z' {
		zero := 0
		dt.offset = &zero
		return pos, ""
	}
	sign := 1
	switch {
	case c == '+':
	case c == '-':
		sign = -1
	case c == 0xe2 && len(s) > pos+1 && s[pos] == 0x88 && s[pos+1] == 0x92: // "−"
		sign = -1
		pos += 2
	default:
		return 0, reasonTzSign
	}
	hours, ok := digits2(s, pos)
	if !ok {
		return 0, reasonTzHour
	}
	var m1 int
	switch {
	case pos+2 < len(s) && s[pos+2] == ':':
		pos += 3
		if m1, ok = digitAt(s, pos); !ok {
			return 0, reasonTzMinute
		}
	case pos+2 < len(s) && s[pos+2] >= '0' && s[pos+2] <= '9':
		pos += 2
		m1 = int(s[pos] - '0')
	default:
		return 0, reasonTzMinute
	}
	m2, ok := digitAt(s, pos+1)
	if !ok {
		return 0, reasonTzMinute
	}
	minuteSeconds := m1*600 + m2*60
	if minuteSeconds >= 3600 {
		return 0, reasonRangeTzMinute
	}
	offset := sign * (hours*3600 + minuteSeconds)
	if offset >= 24*3600 || offset <= -24*3600 {
		return 0, reasonRangeTz
	}
	dt.offset = &offset
	return pos + 2, ""
}

func (d civilDate) time() time.Time {
	return time.Date(d.year, time.Month(d.month), d.day, 0, 0, 0, 0, time.UTC)
}

// time converts to time.Time; a datetime without offset is taken as UTC.
func (dt civilDateTime) time() time.Time {
	loc := time.UTC
	if dt.offset != nil && *dt.offset != 0 {
		loc = time.FixedZone("", *dt.offset)
	}
	d := dt.date
	return time.Date(d.year, time.Month(d.month), d.day, dt.hour, dt.minute, dt.second,
		dt.microsecond*nanosecondsPerMicrosec, loc)
}

// validateDate is pydantic's lax date: an exact date, or a datetime string
// whose time is midnight; a failure reports the datetime parser's reason.
func validateDate(loc []any, in any) (any, *ErrorItem) {
	s, ok := in.(string)
	if !ok {
		return nil, errorPtr(newError("date_type", loc, in))
	}
	d, reason := parseDate(s)
	if reason != "" {
		dt, dtReason := parseDateTime(s)
		if dtReason != "" {
			return nil, errorPtr(temporalParsingError("date_from_datetime_parsing", loc, in, dtReason))
		}
		if dt.hour != 0 || dt.minute != 0 || dt.second != 0 || dt.microsecond != 0 {
			return nil, errorPtr(newError("date_from_datetime_inexact", loc, in))
		}
		d = dt.date
	}
	if d.year < 1 {
		// Python's dates, and so pydantic's, start at year 1; PostgreSQL's
		// date takes year 0 for 1 BC, and refusing it here keeps such a date
		// from ever reaching a read model that cannot hold it.
		return nil, errorPtr(temporalParsingError("date_parsing", loc, in, reasonYearZero))
	}
	return d.time(), nil
}

// validateDateTime is pydantic's lax datetime: a datetime, or a bare date
// taken as midnight; a failure reports the date parser's reason.
func validateDateTime(loc []any, in any) (any, *ErrorItem) {
	s, ok := in.(string)
	if !ok {
		return nil, errorPtr(newError("datetime_type", loc, in))
	}
	if dt, reason := parseDateTime(s); reason == "" {
		if dt.date.year < 1 {
			return nil, errorPtr(temporalParsingError("datetime_parsing", loc, in, reasonYearZero))
		}
		return dt.time(), nil
	}
	d, reason := parseDate(s)
	if reason != "" {
		return nil, errorPtr(temporalParsingError("datetime_from_date_parsing", loc, in, reason))
	}
	if d.year < 1 {
		// As pydantic: Python's datetimes start at year 1, whatever the
		// offset ("0000-12-31T23:00:00-01:00" too).
		return nil, errorPtr(temporalParsingError("datetime_parsing", loc, in, reasonYearZero))
	}
	return d.time(), nil
}
