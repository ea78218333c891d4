package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"lectern/pgtest"
	"lectern/poll"
)

// An unknown subcommand of a group (keys, events, users, projections) is
// an error, as it is at the top: not the group's help and exit status 0,
// which let `lectern keys rotat` look as if it had done its work. The group
// alone still shows its help.
func TestUnknownSubcommandIsAnError(t *testing.T) {
	for _, c := range []struct {
		args    []string
		unknown string
	}{
		{[]string{"keys", "rotat"}, "rotat"},
		{[]string{"events", "exprot"}, "exprot"},
		{[]string{"users", "crate"}, "crate"},
		{[]string{"projections", "deadletters", "list"}, "deadletters"},
		{[]string{"projections", "dead-letters", "lsit"}, "lsit"},
	} {
		cmd := root()
		cmd.SetArgs(c.args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.ExecuteContext(context.Background())
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("unknown command %q", c.unknown)) {
			t.Errorf("lectern %s: %v, want an unknown command error", strings.Join(c.args, " "), err)
		}
	}
	var out strings.Builder
	cmd := root()
	cmd.SetArgs([]string{"keys"})
	cmd.SetOut(&out)
	if err := cmd.ExecuteContext(context.Background()); err != nil || !strings.Contains(out.String(), "rotate") {
		t.Errorf("lectern keys: %v, %q: want its help", err, out.String())
	}
}

// A command that takes no arguments refuses one instead of ignoring it:
// `serve --projections false` (a boolean flag takes its value after =)
// would otherwise run the projections it was asked not to.
func TestStrayArgumentsAreRefused(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--projections", "false"},
		{"migrate", "now"},
		{"users", "create", "ops@example.com", "--name", "Ops", "--password", "long enough"},
	} {
		_, err := cli(t, "postgres://nobody@127.0.0.1:1/none", nil, args...)
		if err == nil || !strings.Contains(err.Error(), "unexpected argument") {
			t.Errorf("lectern %s: %v, want an unexpected argument error", strings.Join(args, " "), err)
		}
	}
}

// A bad --format is refused before the output file is opened: it used to
// be created (an existing one emptied) first.
func TestExportRefusesABadFormatBeforeItsOutput(t *testing.T) {
	_, url := pgtest.FreshURL(t)
	runCLI(t, url, "migrate")
	out := filepath.Join(t.TempDir(), "events.ndjson")
	if err := os.WriteFile(out, []byte("an earlier export\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := cli(t, url, nil, "events", "export", "--format", "cloudevent", "-o", out); err == nil || !strings.Contains(err.Error(), "--format") {
		t.Errorf("a bad --format: %v", err)
	}
	if b, _ := os.ReadFile(out); string(b) != "an earlier export\n" {
		t.Errorf("the existing output holds %q after a refused export", b)
	}
}

// An export that stops says how many events it wrote, so that an
// incremental export can go on from the output's last line: not how many
// it had read into a buffer it then dropped.
func TestExportThatStopsCountsTheEventsItWrote(t *testing.T) {
	pool, url := pgtest.FreshURL(t)
	runCLI(t, url, "users", "create", "--email", "ann@example.com", "--name", "Ann", "--password", "long enough")
	runCLI(t, url, "users", "create", "--email", "bob@example.com", "--name", "Bob", "--password", "long enough")
	// The second user's subject key damaged (Ann's, which opens only as
	// hers): the export stops there.
	if _, err := pool.Exec(context.Background(), `UPDATE subject_keys SET wrapped = (SELECT wrapped FROM subject_keys WHERE subject = 'user-1')
		WHERE subject = 'user-2'`); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "events.ndjson")
	_, err := cli(t, url, nil, "events", "export", "-o", out)
	if err == nil {
		t.Fatal("the export read an event no key opens")
	}
	b, rerr := os.ReadFile(out)
	if rerr != nil {
		t.Fatal(rerr)
	}
	lines := strings.Count(string(b), "\n")
	m := regexp.MustCompile(`stopped after (\d+) events`).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("error %q: want the events written", err)
	}
	if n, _ := strconv.Atoi(m[1]); n != lines {
		t.Errorf("the export says it stopped after %d events, and wrote %d lines: %v", n, lines, err)
	}
	// Ann's events, before the damaged key, are written (whole lines):
	// a resumed export redoes less.
	if lines == 0 || !strings.HasSuffix(string(b), "\n") {
		t.Errorf("the stopped export wrote %d lines (%d bytes): want Ann's, each whole", lines, len(b))
	}
}

// `users create` refuses what the API would refuse at login or sign-up: an
// account it made with a malformed e-mail address, or a password longer
// than login accepts, could never log in. The password is never echoed.
func TestUsersCreateRefusesWhatTheAPIRefuses(t *testing.T) {
	pool, url := pgtest.FreshURL(t)
	long := strings.Repeat("p", 129)
	for _, c := range []struct{ email, name, password, want string }{
		{"ops", "Ops", "long enough", "email"},
		{"ops@", "Ops", "long enough", "email"},
		{"ops@example.com", "Ops", long, "password"},
		{"ops@example.com", strings.Repeat("n", 201), "long enough", "name"},
	} {
		_, err := cli(t, url, nil, "users", "create", "--email", c.email, "--name", c.name, "--password", c.password)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("users create --email %q: %v, want an error about the %s", c.email, err, c.want)
		} else if strings.Contains(err.Error(), c.password) {
			t.Errorf("the error shows the password: %v", err)
		}
	}
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM events`).Scan(&n); err == nil && n != 0 {
		t.Errorf("%d events appended by refused commands", n)
	}
	out, err := cli(t, url, nil, "users", "create", "--email", " Ops@Example.COM ", "--name", "Ops", "--password", "long enough")
	if err != nil || !strings.Contains(out, "ops@example.com") {
		t.Errorf("a valid account: %q, %v", out, err)
	}
}

// A password in a connection string never reaches an error message,
// whichever package wrote the message.
func TestErrorsHideURLPasswords(t *testing.T) {
	_, url := pgtest.FreshURL(t)
	runCLI(t, url, "migrate")
	serve := map[string]string{"LECTERN_JWT_KEY": strings.Repeat("12", 32), "PORT": "0"}
	for _, c := range []struct {
		env  map[string]string
		args []string
	}{
		{nil, []string{"events", "copy", "--to", "https://admin:s3cret-pw@esdb.example.com:2113"}},
		{nil, []string{"events", "copy", "--to", "esdb://admin:s3cret-pw@[bad?tls=false"}},
		{map[string]string{"EVENTSTORE_URL": "kurrentdb://admin:s3cret-pw@esdb.example.com:2113"}, []string{"events", "export"}},
		{map[string]string{"EVENTSTORE_URL": "esdb://admin:s3cret-pw@[bad?tls=false"}, []string{"replay"}},
		{map[string]string{"LECTERN_BROKER_URL": "kafka://u:s3cret-pw@broker.example.com"}, []string{"serve"}},
		{map[string]string{"LECTERN_BROKER_URL": "nats://u:s3cret-pw@[bad"}, []string{"serve"}},
		{nil, []string{"healthcheck", "--url", "http://u:s3cret-pw@127.0.0.1:1/readyz"}},
	} {
		env := map[string]string{}
		for k, v := range c.env {
			env[k] = v
		}
		if c.args[0] == "serve" {
			for k, v := range serve {
				env[k] = v
			}
		}
		_, err := cli(t, url, env, c.args...)
		if err == nil {
			t.Errorf("lectern %s: no error", strings.Join(c.args, " "))
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("lectern %s: the error shows the password: %v", strings.Join(c.args, " "), err)
		}
	}
}

// A replay without the master key of personal data is refused: it used to
// rebuild the read models from the sealed events' placeholders, every
// user's e-mail address and name replaced by "erased" ones.
func TestReplayNeedsTheDataKey(t *testing.T) {
	pool, url := pgtest.FreshURL(t)
	runCLI(t, url, "users", "create", "--email", "ann@example.com", "--name", "Ann", "--password", "long enough")
	if _, err := cli(t, url, map[string]string{"LECTERN_DATA_KEY": ""}, "replay", "accounts"); err == nil || !strings.Contains(err.Error(), "LECTERN_DATA_KEY") {
		t.Errorf("a replay without the data key: %v", err)
	}
	var erased int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM users WHERE email <> 'ann@example.com'`).Scan(&erased); err != nil || erased != 0 {
		t.Errorf("users holds %d other addresses (%v) after the refused replay", erased, err)
	}
	runCLI(t, url, "replay", "accounts")
	var email string
	if err := pool.QueryRow(context.Background(), `SELECT email FROM users`).Scan(&email); err != nil || email != "ann@example.com" {
		t.Errorf("users holds %q (%v) after a replay with the key", email, err)
	}
}

// Commands that only read personal data make no master key: a key file
// that does not exist (a misspelt path) is an error, not a new key that
// opens nothing.
func TestReadingCommandsMakeNoKeyFile(t *testing.T) {
	_, url := pgtest.FreshURL(t)
	runCLI(t, url, "users", "create", "--email", "ann@example.com", "--name", "Ann", "--password", "long enough")
	// events seal too: sealing the history under a key made afresh would
	// tie every personal field written before it to that stray file.
	for _, args := range [][]string{{"events", "export", "-o", os.DevNull}, {"replay"}, {"events", "seal"}} {
		missing := filepath.Join(t.TempDir(), "data.kye")
		_, err := cli(t, url, map[string]string{"LECTERN_DATA_KEY": "", "LECTERN_DATA_KEY_FILE": missing}, args...)
		if err == nil || !strings.Contains(err.Error(), "no key file") {
			t.Errorf("lectern %s with a missing key file: %v", strings.Join(args, " "), err)
		}
		if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("lectern %s made the key file %s", strings.Join(args, " "), missing)
		}
	}
}

// A data key that is not 64 hex characters is reported as the data key,
// not as a "signing key", and without echoing any of it.
func TestBadDataKeyIsReportedAsTheDataKey(t *testing.T) {
	for _, c := range []struct{ key, previous string }{
		{"zz" + strings.Repeat("ab", 31), strings.Repeat("cd", 32)},
		{"abcd", strings.Repeat("cd", 32)},
		{strings.Repeat("ab", 32), "qq" + strings.Repeat("cd", 31)},
	} {
		_, err := cli(t, "postgres://nobody@127.0.0.1:1/none", map[string]string{"LECTERN_DATA_KEY": c.key, "LECTERN_DATA_KEY_PREVIOUS": c.previous}, "keys", "rotate")
		if err == nil || strings.Contains(err.Error(), "signing key") || strings.Contains(err.Error(), "'z'") || strings.Contains(err.Error(), "'q'") ||
			!strings.Contains(err.Error(), "64 hex characters") {
			t.Errorf("LECTERN_DATA_KEY %q, LECTERN_DATA_KEY_PREVIOUS %q: %v", c.key, c.previous, err)
		}
	}
}

// serve binds its port before it says it serves or starts its
// projections: a port in use is one clear error, without a "lectern
// serving" line or a projection's error before it. On a free port it
// serves until its context ends, and stops cleanly.
func TestServeListensBeforeItSaysSo(t *testing.T) {
	_, url := pgtest.FreshURL(t)
	held, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Close() }()
	port := strconv.Itoa(held.Addr().(*net.TCPAddr).Port)
	env := map[string]string{"LECTERN_JWT_KEY": strings.Repeat("12", 32), "PORT": port, "LECTERN_LOG_LEVEL": "info"}
	logged, err := withStderr(t, func() error {
		_, err := cli(t, url, env, "serve")
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("serve on a port in use: %v", err)
	}
	if strings.Contains(logged, "lectern serving") || strings.Contains(logged, `"level":"ERROR"`) {
		t.Errorf("serve on a port in use logged:\n%s", logged)
	}

	free, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	port = strconv.Itoa(free.Addr().(*net.TCPAddr).Port)
	_ = free.Close()
	env["PORT"], env["LECTERN_LOG_LEVEL"] = port, "error"
	cliEnv(t, url, env)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		cmd := root()
		cmd.SetArgs([]string{"serve"})
		cmd.SetOut(io.Discard)
		done <- cmd.ExecuteContext(ctx)
	}()
	ready := poll.Until(30*time.Second, func() bool {
		res, err := http.Get("http://127.0.0.1:" + port + "/readyz")
		if err != nil {
			return false
		}
		_ = res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	stop()
	if !ready {
		t.Error("serve never answered /readyz with 200")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve stopped with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop when its context ended")
	}
}

// withStderr runs f with os.Stderr captured, and returns what it wrote.
func withStderr(t *testing.T, f func() error) (string, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = w
	got := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		got <- string(b)
	}()
	ferr := f()
	os.Stderr = saved
	_ = w.Close()
	return <-got, ferr
}

// A master key of personal data that does not open the database's subject
// keys (another deployment's, a misspelt key file made afresh) is refused
// by every command that seals or opens personal fields, before it does
// anything: with it, serve would read no one's data and seal new users'
// under keys no other process can open.
func TestAnotherMasterKeyIsRefused(t *testing.T) {
	pool, url := pgtest.FreshURL(t)
	runCLI(t, url, "users", "create", "--email", "ann@example.com", "--name", "Ann", "--password", "long enough")
	other := map[string]string{"LECTERN_DATA_KEY": strings.Repeat("cd", 32)}
	for _, args := range [][]string{
		{"users", "create", "--email", "bob@example.com", "--name", "Bob", "--password", "long enough"},
		{"events", "export", "-o", os.DevNull},
		{"events", "seal"},
		{"replay", "accounts"},
		// serve builds its service as users create does (build).
	} {
		if _, err := cli(t, url, other, args...); err == nil || !strings.Contains(err.Error(), "does not open this database's subject keys") {
			t.Errorf("lectern %s with another master key: %v, want refused", strings.Join(args, " "), err)
		}
	}
	var users int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM events WHERE event_type = 'user.signed_up'`).Scan(&users); err != nil || users != 1 {
		t.Errorf("%d users signed up (%v) after the refused commands, want Ann alone", users, err)
	}
}

// A numeric setting is a positive number or refused by name; unset, it
// leaves the default alone.
func TestPositiveEnv(t *testing.T) {
	for _, c := range []struct {
		value   string
		n       int
		set     bool
		refused bool
	}{{"", 0, false, false}, {"12", 12, true, false}, {"0", 0, true, true}, {"-3", -3, true, true}, {"x", 0, true, true}} {
		t.Setenv("LECTERN_TEST_NUMBER", c.value)
		n, set, err := positiveEnv("LECTERN_TEST_NUMBER", "a positive number")
		if n != c.n || set != c.set || (err != nil) != c.refused {
			t.Errorf("%q: %d, %v, %v", c.value, n, set, err)
		}
		if c.refused && (err == nil || !strings.Contains(err.Error(), `LECTERN_TEST_NUMBER "`+c.value+`": want a positive number`)) {
			t.Errorf("%q refused as %v", c.value, err)
		}
	}
}
