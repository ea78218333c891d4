// Package pgtext tells the errors of database work without the values they
// quote.
//
// A server error's message can quote the value that failed: `invalid input
// syntax for type integer: "Ann Smith"`; so do pgx's (`unable to encode
// "Ann Smith" into binary format for int8`) and Go's parsers (`strconv.
// ParseInt: parsing "Ann": invalid syntax`). A projection applies events
// whose values are personal, and its failures go to the log and to
// projection_dead_letters, which must not keep them (docs/privacy.md).
// PostgreSQL quotes every value and identifier it puts in a message ("Use
// quotes always to delimit … variables", its message style guide); Go's %q
// and %#v quote strings. So the text between quotes goes: a server message
// is kept up to its first quote (it does not escape a quote inside a value,
// so its quotes cannot be paired), with the names of the constraint, table
// and column, which are the schema's and not a person's, from the error's
// own fields; a message translated to the server's language is left out
// whole (its quotes may be other marks); and in the rest, each span
// between double quotes, Go's escapes honoured, is told as "…". What an
// error tells without quotes (a number, a byte slice, a single character,
// a trigger's RAISE with a value) stays.
package pgtext

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Valueless returns err told without what it quotes (see the package): its
// Error() has the quoted text taken out, while errors.Is and errors.As still
// see through it to err. An error that quotes nothing is returned as it is.
func Valueless(err error) error {
	if err == nil {
		return nil
	}
	text := err.Error()
	// Each server error's text becomes a mark (no quote in it) while the
	// rest is unquoted, then its Text.
	told, texts := text, []string(nil)
	for _, pe := range serverErrors(err, nil) {
		if strings.Contains(told, pe.Error()) {
			told = strings.ReplaceAll(told, pe.Error(), mark(len(texts)))
			texts = append(texts, Text(pe))
		}
	}
	told = unquoted(cutServerMessages(told))
	for i, t := range texts {
		told = strings.ReplaceAll(told, mark(i), t)
	}
	if told == text {
		return err
	}
	return &valueless{err: err, text: told}
}

// cutServerMessages cuts the server messages in text that came there by
// other means than wrapping (%v, a copy), "<severity>: <message> (SQLSTATE
// <code>)": their quotes cannot be paired, so the text goes from the first
// quote mark before the last SQLSTATE to that SQLSTATE (a value may hold
// "(SQLSTATE " itself: the last is the server's).
func cutServerMessages(text string) string {
	codes := sqlstate.FindAllStringIndex(text, -1)
	if len(codes) == 0 {
		return text
	}
	last := codes[len(codes)-1][0]
	q := strings.IndexAny(text[:last], quotes)
	if q < 0 {
		return text
	}
	return text[:q] + "… " + text[last:]
}

// sqlstate ends a server message as pgconn tells it.
var sqlstate = regexp.MustCompile(`\(SQLSTATE [0-9A-Z]{5}\)`)

// mark stands for the i-th server error's text while the rest is unquoted.
func mark(i int) string { return "\x00" + strconv.Itoa(i) + "\x00" }

// quotes are the marks that open a quotation in a server message, in
// English and in the languages PostgreSQL is translated to.
const quotes = `"'«»‹›“”„‘’‚「」`

type valueless struct {
	err  error
	text string
}

func (v *valueless) Error() string { return v.text }
func (v *valueless) Unwrap() error { return v.err }

// Text is pe as pgconn tells it ("ERROR: <message> (SQLSTATE <code>)") with
// the message cut at its first quote, and the schema's names that the
// server reported. A message in another language than English (the
// server's lc_messages) is left out: its quotes may be other marks.
func Text(pe *pgconn.PgError) string {
	severity, msg := pe.Severity, pe.Message
	if pe.SeverityUnlocalized != "" && pe.SeverityUnlocalized != pe.Severity {
		severity, msg = pe.SeverityUnlocalized, "(a message in the server's language, left out)"
	} else if i := strings.IndexAny(msg, quotes); i >= 0 {
		msg = strings.TrimRight(msg[:i], " :") + " …"
	}
	var b strings.Builder
	b.WriteString(severity + ": " + msg + " (SQLSTATE " + pe.Code)
	for _, name := range [...]struct{ what, value string }{
		{"constraint", pe.ConstraintName}, {"table", pe.TableName}, {"column", pe.ColumnName},
	} {
		if name.value != "" {
			b.WriteString("; " + name.what + " " + name.value)
		}
	}
	b.WriteString(")")
	return b.String()
}

// unquoted is s with the text of each double-quoted span replaced by "…".
// A backslash escapes the byte after it, as in Go's quoting; a quote left
// open takes the rest of s.
func unquoted(s string) string {
	i := strings.IndexByte(s, '"')
	if i < 0 {
		return s
	}
	var b strings.Builder
	for i >= 0 {
		b.WriteString(s[:i])
		b.WriteString(`"…"`)
		j := i + 1
		for j < len(s) && s[j] != '"' {
			if s[j] == '\\' {
				j++
			}
			j++
		}
		if j >= len(s) {
			return b.String()
		}
		s = s[j+1:]
		i = strings.IndexByte(s, '"')
	}
	b.WriteString(s)
	return b.String()
}

// serverErrors appends to out every *pgconn.PgError in err's tree.
func serverErrors(err error, out []*pgconn.PgError) []*pgconn.PgError {
	if pe, ok := err.(*pgconn.PgError); ok { //nolint:errorlint // a walk of the whole tree, joined errors too
		return append(out, pe)
	}
	switch u := err.(type) { //nolint:errorlint // as above
	case interface{ Unwrap() error }:
		if inner := u.Unwrap(); inner != nil {
			return serverErrors(inner, out)
		}
	case interface{ Unwrap() []error }:
		for _, inner := range u.Unwrap() {
			if inner != nil {
				out = serverErrors(inner, out)
			}
		}
	}
	return out
}
