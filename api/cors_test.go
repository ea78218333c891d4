package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"lectern/api"
)

const appOrigin = "https://app.example.com"

// preflight is a browser's OPTIONS before a cross-origin request: the
// answer's status and headers.
func preflight(t *testing.T, e *env, path, origin, method, headers string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodOptions, e.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", method)
	if headers != "" {
		req.Header.Set("Access-Control-Request-Headers", headers)
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	return answer{StatusCode: res.StatusCode, Header: res.Header}
}

type answer struct {
	StatusCode int
	Header     http.Header
}

// A page of an allowed origin may call the API: its preflight is answered
// with what it asked for, and the answers' headers it needs are readable.
// Other origins get no grant; without LECTERN_CORS_ORIGINS there is no CORS.
func TestCORS(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envConfig{corsOrigins: []string{appOrigin}})
	u := e.signUp(t)

	res := preflight(t, e, "/agents", appOrigin, "POST", "authorization,content-type,idempotency-key")
	if res.StatusCode != http.StatusOK || res.Header.Get("Access-Control-Allow-Origin") != appOrigin ||
		!strings.Contains(res.Header.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(strings.ToLower(res.Header.Get("Access-Control-Allow-Headers")), "authorization") ||
		res.Header.Get("Access-Control-Max-Age") != "600" || res.Header.Get("Access-Control-Allow-Credentials") != "" ||
		res.Header.Get("X-Request-ID") == "" {
		t.Errorf("preflight of an allowed origin: %d %v", res.StatusCode, res.Header)
	}
	// Every request header the API reads, as a page sends it on a read:
	// without the grant the browser never sends the request.
	for _, h := range []string{"x-min-position", "x-request-id", "x-correlation-id", "traceparent", "tracestate"} {
		res := preflight(t, e, "/agents", appOrigin, "GET", "authorization,"+h)
		if res.Header.Get("Access-Control-Allow-Origin") != appOrigin ||
			!strings.Contains(strings.ToLower(res.Header.Get("Access-Control-Allow-Headers")), h) {
			t.Errorf("preflight of GET /agents with %s: %d, Access-Control-Allow-Origin %q, Access-Control-Allow-Headers %q",
				h, res.StatusCode, res.Header.Get("Access-Control-Allow-Origin"), res.Header.Get("Access-Control-Allow-Headers"))
		}
	}
	if res := preflight(t, e, "/agents", "https://evil.example.com", "POST", "authorization"); res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight of another origin granted: %v", res.Header)
	}

	got := e.do(t, "POST", "/agents", map[string]any{"name": "Tutor", "system_prompt": "p"}, u.Access, "Origin", appOrigin)
	wantStatus(t, got, http.StatusCreated)
	exposed := got.Header.Get("Access-Control-Expose-Headers")
	for _, h := range []string{"X-Event-Position", "X-Projection-Pending", "X-Request-ID", "Retry-After", "Location", "Idempotent-Replayed"} {
		if !strings.Contains(strings.ToLower(exposed), strings.ToLower(h)) { // header names are case-insensitive
			t.Errorf("Access-Control-Expose-Headers %q lacks %s", exposed, h)
		}
	}
	if got.Header.Get("Access-Control-Allow-Origin") != appOrigin {
		t.Errorf("answer to an allowed origin: Access-Control-Allow-Origin %q", got.Header.Get("Access-Control-Allow-Origin"))
	}

	plain := sharedEnv(t) // no origins configured
	if res := preflight(t, plain, "/agents", appOrigin, "POST", "authorization"); res.StatusCode != http.StatusMethodNotAllowed ||
		res.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight without LECTERN_CORS_ORIGINS: %d %v", res.StatusCode, res.Header)
	}
}

func TestParseCORSOrigins(t *testing.T) {
	t.Parallel()
	got, err := api.ParseCORSOrigins(" https://app.example.com/ , http://localhost:5173,*")
	if err != nil || strings.Join(got, " ") != "https://app.example.com http://localhost:5173 *" {
		t.Errorf("got %q, %v", got, err)
	}
	for _, bad := range []string{"app.example.com", "ftp://x", "https://x/path", "https://user@x", "https://x?q=1"} {
		if _, err := api.ParseCORSOrigins(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// browser is Debian's chromium, or the test skips.
func browser(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium installed (apt-get install chromium): the browser test of CORS is skipped")
	return ""
}

// A page served from another origin signs in and lists its agents through
// fetch, in a real (headless) browser: what a front-end developer does.
func TestCORSInABrowser(t *testing.T) {
	t.Parallel()
	chromium := browser(t)
	// The page's server is started once its page is written: its origin is
	// known before, for the API's allow-list.
	var html string
	page := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(html))
	}))
	t.Cleanup(page.Close)
	origin := "http://" + page.Listener.Addr().String()
	e := newEnv(t, envConfig{corsOrigins: []string{origin}})
	email := fmt.Sprintf("browser-%d@example.com", time.Now().UnixNano())
	if _, _, err := e.svc.Identity.CreateUser(context.Background(), email, "correct horse", "Browser", false); err != nil {
		t.Fatal(err)
	}
	html = `<!doctype html><html><body><pre id="out">pending</pre><script>
(async () => {
  const out = document.getElementById("out");
  try {
    const login = await fetch("` + e.srv.URL + `/user/login", {method: "POST", headers: {"Content-Type": "application/json"},
      body: JSON.stringify({email: "` + email + `", password: "correct horse"})});
    const tokens = await login.json();
    const created = await fetch("` + e.srv.URL + `/agents", {method: "POST",
      headers: {"Content-Type": "application/json", "Authorization": "Bearer " + tokens.access_token},
      body: JSON.stringify({name: "From a page", system_prompt: "p"})});
    const position = created.headers.get("X-Event-Position");
    const list = await (await fetch("` + e.srv.URL + `/agents", {headers: {"Authorization": "Bearer " + tokens.access_token}})).json();
    out.textContent = "RESULT " + login.status + " " + created.status + " " + (position ? "position" : "no-position") + " " + list.items.map(a => a.name).join("|");
  } catch (err) {
    out.textContent = "RESULT error " + err;
  }
})();
</script></body></html>`
	page.Start()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir="+t.TempDir(), "--virtual-time-budget=20000", "--dump-dom", page.URL)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	dom := string(out)
	if want := "RESULT 200 201 position From a page"; !strings.Contains(dom, want) {
		t.Errorf("the page shows %q, want %q", between(dom, "<pre id=\"out\">", "</pre>"), want)
	}
}

func between(s, from, to string) string {
	_, after, ok := strings.Cut(s, from)
	if !ok {
		return s
	}
	before, _, _ := strings.Cut(after, to)
	return before
}
