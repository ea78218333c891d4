package pgtext_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"lectern/pgtest"
	"lectern/pgtext"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const marker = `Ann "Quoted" MRK42`

// What PostgreSQL, pgx and Go say of a value they could not take, told
// without it: the kind of failure and the schema's names stay.
func TestValuelessTakesTheQuotedValuesOut(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS pgtext_people (id INT PRIMARY KEY, name TEXT NOT NULL CHECK (name <> 'x'))`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO pgtext_people VALUES (1, $1) ON CONFLICT DO NOTHING`, marker); err != nil {
		t.Fatal(err)
	}
	server := func(sql string, args ...any) error {
		_, err := pool.Exec(ctx, sql, args...)
		if err == nil {
			t.Fatalf("%s: no error", sql)
		}
		return fmt.Errorf("apply event 7: %w", err)
	}
	_, parseErr := strconv.ParseInt(marker, 10, 64)
	for _, c := range []struct {
		name  string
		err   error
		wants []string // what the told error still says
		value bool     // err quotes the value
	}{
		{"a value of the wrong type", server(`SELECT $1::text::int`, marker),
			[]string{"apply event 7: ERROR: invalid input syntax for type integer …", "SQLSTATE 22P02"}, true},
		{"a date out of range", server(`SELECT $1::text::date`, marker), []string{"SQLSTATE 22007"}, true},
		{"a unique violation", server(`INSERT INTO pgtext_people VALUES (1, 'y')`),
			[]string{"duplicate key value violates unique constraint …", "SQLSTATE 23505; constraint pgtext_people_pkey; table pgtext_people"}, false},
		{"a not-null violation", server(`INSERT INTO pgtext_people VALUES (2, NULL)`),
			[]string{"null value in column …", "table pgtext_people; column name"}, false},
		{"a check violation", server(`INSERT INTO pgtext_people VALUES (3, 'x')`),
			[]string{"SQLSTATE 23514; constraint pgtext_people_name_check; table pgtext_people"}, false},
		{"pgx's encoding", server(`SELECT $1::int8`, struct{ Name string }{marker}),
			[]string{"failed to encode args[0]: unable to encode struct { Name string }{Name:\"…\"} into binary format for int8"}, true},
		{"Go's parser", fmt.Errorf("event 7: %w", parseErr), []string{`strconv.ParseInt: parsing "…": invalid syntax`}, true},
		{"a server error copied, not wrapped", errors.New(server(`SELECT $1::text::int`, `Ann "Quoted" MRK42`).Error()),
			[]string{"apply event 7: ERROR: invalid input syntax for type integer: … (SQLSTATE 22P02)"}, true},
		{"a copied server error whose value holds a SQLSTATE", errors.New(server(`SELECT $1::text::int`, `Ann (SQLSTATE MRK42 x`).Error()),
			[]string{"apply event 7: ERROR: invalid input syntax for type integer: … (SQLSTATE 22P02)"}, true},
		{"a server error in German", fmt.Errorf("apply event 7: %w", &pgconn.PgError{Severity: "FEHLER", SeverityUnlocalized: "ERROR",
			Code: "22P02", Message: "ungültige Eingabesyntax für Typ integer: »Ann MRK42«"}),
			[]string{"apply event 7: ERROR: (a message in the server's language, left out) (SQLSTATE 22P02)"}, true},
		{"two joined", errors.Join(server(`SELECT $1::text::int`, marker), fmt.Errorf("name %q", marker)),
			[]string{"SQLSTATE 22P02", `name "…"`}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.value != strings.Contains(c.err.Error(), "MRK42") {
				t.Fatalf("the error quotes the value: %v, want %v: %v", !c.value, c.value, c.err)
			}
			told := pgtext.Valueless(c.err)
			if strings.Contains(told.Error(), "MRK42") || strings.Contains(told.Error(), "Quoted") {
				t.Errorf("told %q: the value is in it", told)
			}
			for _, want := range c.wants {
				if !strings.Contains(told.Error(), want) {
					t.Errorf("told %q, want it to say %q", told, want)
				}
			}
			var pe *pgconn.PgError
			if !errors.Is(told, c.err) || errors.As(c.err, &pe) != errors.As(told, &pe) {
				t.Errorf("told %T does not unwrap to %T", told, c.err)
			}
		})
	}
	plain := errors.New("connection reset by peer")
	if got := pgtext.Valueless(plain); got != plain { //nolint:errorlint // the very error
		t.Errorf("an error quoting nothing came back as %#v", got)
	}
	if pgtext.Valueless(nil) != nil {
		t.Error("nil came back as an error")
	}
}

// A quote a backslash escapes does not end the span; a quote left open
// takes the rest.
func TestValuelessReadsGoQuoting(t *testing.T) {
	for in, want := range map[string]string{
		`name "a \"b\" c" refused`: `name "…" refused`,
		`name "a\\" then "b"`:      `name "…" then "…"`,
		`cut "open to the end`:     `cut "…"`,
		`no quotes`:                `no quotes`,
	} {
		if got := pgtext.Valueless(errors.New(in)).Error(); got != want {
			t.Errorf("%s: told %s, want %s", in, got, want)
		}
	}
}
