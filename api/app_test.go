package api_test

// The practice page, in a real (headless) browser driven through the Chrome
// DevTools Protocol over a pipe (--remote-debugging-pipe): no library, only
// JSON messages each ended by a NUL byte.

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"lectern/poll"
)

// The page and its files are served from the binary, with their types.
func TestPracticePageIsServed(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	for _, tc := range []struct{ path, ctype, holds string }{
		{"/", "text/html; charset=utf-8", `<script src="/app/app.js"`},
		{"/app", "text/html; charset=utf-8", `<link rel="stylesheet" href="/app/app.css">`},
		{"/app/", "text/html; charset=utf-8", "<title>Lectern"},
		{"/app/app.js", "text/javascript; charset=utf-8", "text/event-stream"},
		{"/app/app.css", "text/css; charset=utf-8", ".column"},
	} {
		res := e.send(t, "GET", tc.path, nil, "")
		wantStatus(t, res, http.StatusOK)
		wantHeader(t, res, "Content-Type", tc.ctype)
		wantHeader(t, res, "X-Content-Type-Options", "nosniff")
		if !strings.Contains(string(res.Body), tc.holds) {
			t.Errorf("GET %s does not hold %q", tc.path, tc.holds)
		}
		if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", tc.path, csp)
		}
		// Revalidated by its ETag.
		again := e.send(t, "GET", tc.path, nil, "", "If-None-Match", res.Header.Get("ETag"))
		wantStatus(t, again, http.StatusNotModified)
	}
	// Everything it loads is its own: it works offline.
	page := e.send(t, "GET", "/", nil, "")
	for _, m := range assetRef.FindAllStringSubmatch(string(page.Body), -1) {
		if !strings.HasPrefix(m[1], "/app/") {
			t.Errorf("the page loads %s from elsewhere", m[1])
		}
	}
	wantDetail(t, e.do(t, "GET", "/app/nope.js", nil, ""), http.StatusNotFound, "Not Found")
}

// A student signs up on the page, joins a class with its invite code, runs
// a two-model turn on the echo models and sees both columns fill as they
// stream, continues the chat, and opens the session again from the list.
func TestPracticePageInABrowser(t *testing.T) {
	t.Parallel()
	chromium := browser(t)
	e := sharedEnv(t)
	s := openSchool(t, e)
	class := e.createClass(t, s, map[string]any{"name": "Browser class"})
	code := ""
	for _, c := range field(t, class, "invite_codes").([]any) {
		if c := c.(map[string]any); c["target_role"] == "student" {
			code = c["code"].(string)
		}
	}
	email := uniqueEmail()

	b := startBrowser(t, chromium)
	b.navigate(t, e.srv.URL+"/")
	b.waitFor(t, "the sign-in form", `!document.getElementById("signin").hidden`)
	b.run(t, `document.getElementById("tab-signup").click();
		document.getElementById("signup-email").value = `+jsString(email)+`;
		document.getElementById("code-form").requestSubmit();`)
	b.waitFor(t, "the code form", `!document.getElementById("verify-form").hidden`)
	b.run(t, `document.getElementById("signup-code").value = `+jsString(e.mail.code(t, email))+`;
		document.getElementById("verify-form").requestSubmit();`)
	b.waitFor(t, "the sign-up form", `!document.getElementById("signup-form").hidden`)
	b.run(t, `document.getElementById("signup-name").value = "Page Student";
		document.getElementById("signup-password").value = "correct horse battery";
		document.getElementById("signup-form").requestSubmit();`)
	b.waitFor(t, "the practice page", `!document.getElementById("practice").hidden && document.querySelectorAll("#models input").length === 2`)

	b.run(t, `document.getElementById("join-code").value = `+jsString(code)+`;
		document.getElementById("join-form").requestSubmit();`)
	b.waitFor(t, "the class joined", `document.getElementById("class").value === `+jsString(fmt.Sprint(num(t, class, "id"))))
	b.run(t, `for (const box of document.querySelectorAll("#models input")) box.checked = true;
		document.getElementById("prompt").value = "Hello from a real browser";
		document.getElementById("prompt-form").requestSubmit();`)
	b.waitFor(t, "the turn recorded", `document.querySelector(".turn[data-recorded='true']") !== null && !document.getElementById("send").disabled`)

	type column struct {
		Model, State, Text string
		Deltas             int
	}
	columns := func(turn int) []column {
		var out []column
		b.eval(t, `[...document.querySelectorAll(".turn")[`+fmt.Sprint(turn)+`].querySelectorAll(".column")].map(c =>
			({Model: c.dataset.model, State: c.dataset.state, Text: c.querySelector(".text").textContent, Deltas: Number(c.dataset.deltas)}))`, &out)
		return out
	}
	got := columns(0)
	if len(got) != 2 || got[0].Model != "echo" || got[0].Text != "Hello from a real browser" || got[0].State != "done" ||
		got[1].Model != "echo-reverse" || got[1].Text != "resworb laer a morf olleH" || got[1].State != "done" {
		t.Fatalf("the columns show %+v", got)
	}
	for _, c := range got {
		if c.Deltas != 5 {
			t.Errorf("%s's column got %d deltas, want 5 (streamed word by word)", c.Model, c.Deltas)
		}
	}

	// Continue the chat.
	b.run(t, `document.getElementById("prompt").value = "And a second turn";
		document.getElementById("prompt-form").requestSubmit();`)
	b.waitFor(t, "the second turn recorded", `document.querySelectorAll(".turn[data-recorded='true']").length === 2 && !document.getElementById("send").disabled`)
	if got := columns(1); len(got) != 2 || got[0].Text != "And a second turn" {
		t.Errorf("the second turn shows %+v", got)
	}
	if path := os.Getenv("LECTERN_SCREENSHOT"); path != "" {
		b.screenshot(t, path)
	}

	// Browse: a new session empties the page; the list opens the old one.
	b.run(t, `document.getElementById("new-session").click();`)
	b.waitFor(t, "an empty page", `document.querySelectorAll(".turn").length === 0`)
	b.waitFor(t, "the session listed", `document.querySelectorAll("#sessions button").length === 1`)
	b.run(t, `document.querySelector("#sessions button").click();`)
	b.waitFor(t, "the session reopened", `document.querySelectorAll(".turn[data-recorded='true']").length === 2`)
	if got := columns(0); len(got) != 2 || got[1].Text != "resworb laer a morf olleH" || got[1].State != "done" {
		t.Errorf("the reopened session shows %+v", got)
	}
}

func jsString(s string) string {
	raw, _ := json.Marshal(s)
	return string(raw)
}

// headless is a chromium driven over --remote-debugging-pipe: it reads
// commands on its fd 3 and writes answers on its fd 4.
type headless struct {
	in      io.WriteCloser
	session string // the page's flat session id
	mu      sync.Mutex
	next    int
	pending map[int]chan cdpMessage
	dead    chan struct{}
}

type cdpMessage struct {
	ID     int             `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

func startBrowser(t *testing.T, chromium string) *headless {
	t.Helper()
	toBrowser, commands, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	answers, fromBrowser, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	cmd := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--no-default-browser-check", "--user-data-dir="+home+"/profile", "--remote-debugging-pipe",
		"--window-size=1280,800", "about:blank")
	cmd.Env = append(os.Environ(), "HOME="+home)
	cmd.ExtraFiles = []*os.File{toBrowser, fromBrowser} // its fds 3 and 4
	// Its own process group: its helper processes end with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = toBrowser.Close()
	_ = fromBrowser.Close()
	b := &headless{in: commands, pending: map[int]chan cdpMessage{}, dead: make(chan struct{})}
	go b.read(answers)
	t.Cleanup(func() {
		// Closing its pipe ends the browser; the group is killed if it lingers.
		_ = commands.Close()
		select {
		case <-b.dead:
		case <-time.After(10 * time.Second):
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		_ = answers.Close()
	})

	var target struct {
		TargetID string `json:"targetId"`
	}
	b.call(t, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	b.call(t, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached)
	b.session = attached.SessionID
	b.call(t, b.session, "Emulation.setDeviceMetricsOverride", map[string]any{"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": false}, nil)
	return b
}

// read routes the browser's answers to their callers (events are dropped).
func (b *headless) read(r io.Reader) {
	defer close(b.dead)
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		raw, err := br.ReadBytes(0)
		if err != nil {
			return
		}
		var m cdpMessage
		if json.Unmarshal(raw[:len(raw)-1], &m) != nil || m.ID == 0 {
			continue
		}
		b.mu.Lock()
		ch := b.pending[m.ID]
		delete(b.pending, m.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
}

// call sends a command (to the page's session when session is set) and
// decodes its result into out.
func (b *headless) call(t testing.TB, session, method string, params any, out any) {
	t.Helper()
	b.mu.Lock()
	b.next++
	id := b.next
	ch := make(chan cdpMessage, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method, "params": params}
	if session != "" {
		msg["sessionId"] = session
	}
	raw, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.in.Write(append(raw, 0)); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			t.Fatalf("%s: %s", method, m.Error.Message)
		}
		if out != nil {
			if err := json.Unmarshal(m.Result, out); err != nil {
				t.Fatalf("%s: %v: %s", method, err, m.Result)
			}
		}
	case <-b.dead:
		t.Fatalf("%s: the browser exited", method)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no answer within 30 s", method)
	}
}

func (b *headless) navigate(t testing.TB, url string) {
	t.Helper()
	b.call(t, b.session, "Page.navigate", map[string]any{"url": url}, nil)
}

// eval evaluates a JavaScript expression in the page (awaiting a promise)
// and decodes its value into out.
func (b *headless) eval(t testing.TB, expression string, out any) {
	t.Helper()
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	b.call(t, b.session, "Runtime.evaluate", map[string]any{"expression": expression, "returnByValue": true, "awaitPromise": true}, &res)
	if res.Exception != nil {
		t.Fatalf("the page threw %s %s evaluating:\n%s", res.Exception.Text, res.Exception.Exception.Description, expression)
	}
	if out != nil && len(res.Result.Value) > 0 {
		if err := json.Unmarshal(res.Result.Value, out); err != nil {
			t.Fatalf("%v: %s", err, res.Result.Value)
		}
	}
}

// run evaluates statements in the page.
func (b *headless) run(t testing.TB, statements string) {
	t.Helper()
	b.eval(t, "(() => { "+statements+" })()", nil)
}

// waitFor polls a condition in the page; on time-out it shows the page's
// status line and error.
func (b *headless) waitFor(t testing.TB, what, condition string) {
	t.Helper()
	if poll.Until(20*time.Second, func() bool {
		var ok bool
		// Until the page has loaded, its elements are missing.
		b.eval(t, "(() => { try { return Boolean("+condition+"); } catch { return false; } })()", &ok)
		return ok
	}) {
		return
	}
	var shown string
	b.eval(t, `(document.getElementById("signin-error") || {}).textContent + " | " + (document.getElementById("status") || {}).textContent`, &shown)
	t.Fatalf("%s: not so after 20 s (the page says %q)", what, shown)
}

// screenshot saves the page as a PNG.
func (b *headless) screenshot(t testing.TB, path string) {
	t.Helper()
	var shot struct {
		Data string `json:"data"`
	}
	b.call(t, b.session, "Page.captureScreenshot", map[string]any{"format": "png"}, &shot)
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
