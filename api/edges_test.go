package api_test

// Requests that go wrong on the wire: bodies cut short, bodies too slow,
// bodies too large for a client that writes before it reads, and clients that
// go away. Each is the client's doing: a 4xx (or nginx's 499 in the log),
// never a 5xx, and never logged as an ERROR.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"lectern/pgtest"
	"lectern/poll"
)

// rawRequest writes head and body on a fresh connection to addr, closes its
// writing side when closeWrite, and reads the answer.
func rawRequest(t *testing.T, addr, head string, body []byte, closeWrite bool) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatalf("writing the head: %v", err)
	}
	if _, err := conn.Write(body); err != nil {
		t.Fatalf("writing the body (the server reset the connection?): %v", err)
	}
	if closeWrite {
		if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer's body: %v", err)
	}
	return resp, raw
}

func wantRawDetail(t *testing.T, resp *http.Response, raw []byte, status int, detail string) {
	t.Helper()
	var got struct{ Detail string }
	if resp.StatusCode != status || json.Unmarshal(raw, &got) != nil || got.Detail != detail {
		t.Errorf("got %d %s, want %d {\"detail\":%q}", resp.StatusCode, raw, status, detail)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
}

// noErrorLogged checks that nothing about the request was logged at ERROR.
func noErrorLogged(t *testing.T, e *env, requestID string) {
	t.Helper()
	for _, line := range e.logs.of(requestID) {
		if strings.Contains(line, `"level":"ERROR"`) {
			t.Errorf("logged as a server error: %s", line)
		}
	}
}

func TestTruncatedBody(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	id := uuid.NewString()
	body := `{"name":"cut","system_prompt":"sh`
	head := fmt.Sprintf("POST /agents HTTP/1.1\r\nHost: lectern\r\nAuthorization: Bearer %s\r\nX-Request-ID: %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", u.Access, id, len(body)+100)
	resp, raw := rawRequest(t, strings.TrimPrefix(e.srv.URL, "http://"), head, []byte(body), true) //nolint:bodyclose // rawRequest closes it
	wantRawDetail(t, resp, raw, http.StatusBadRequest, "The request body could not be read: it ended before its announced length")
	noErrorLogged(t, e, id)
	wantBody(t, e.do(t, "GET", "/agents", nil, u.Access), http.StatusOK, `{"items":[],"total":0,"page":1,"size":50}`)
}

// A body that stops arriving is cut at the server's read timeout with a 408
// (lectern serve's is 30 s; this server's is short).
func TestSlowBody(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	srv := httptest.NewUnstartedServer(e.svc.Handler)
	srv.Config.ReadTimeout = 300 * time.Millisecond
	srv.Start()
	defer srv.Close()
	id := uuid.NewString()
	head := fmt.Sprintf("POST /agents HTTP/1.1\r\nHost: lectern\r\nAuthorization: Bearer %s\r\nX-Request-ID: %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n", u.Access, id)
	// The connection stays open, its body a third written: the server must
	// answer by itself.
	resp, raw := rawRequest(t, strings.TrimPrefix(srv.URL, "http://"), head, []byte(`{"name":"slow",`), false) //nolint:bodyclose // rawRequest closes it
	wantRawDetail(t, resp, raw, http.StatusRequestTimeout, "The request body did not arrive in time")
	noErrorLogged(t, e, id)
}

// A client that writes its whole request before it reads (Python's urllib
// and requests do) sees the 413, whether or not it announced the length.
// The body is 6 MiB, more than loopback's socket buffers hold (they swallow
// the 2 MiB that reset a client over a real network).
func TestBodyTooLargeForAClientThatWritesFirst(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	big := []byte(`{"name":"a","system_prompt":"` + strings.Repeat("x", 6<<20) + `"}`)
	addr := strings.TrimPrefix(e.srv.URL, "http://")

	t.Run("with Content-Length", func(t *testing.T) {
		head := fmt.Sprintf("POST /agents HTTP/1.1\r\nHost: lectern\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", u.Access, len(big))
		resp, raw := rawRequest(t, addr, head, big, false) //nolint:bodyclose // rawRequest closes it
		wantRawDetail(t, resp, raw, http.StatusRequestEntityTooLarge, "Request body too large")
	})
	t.Run("chunked", func(t *testing.T) {
		head := fmt.Sprintf("POST /agents HTTP/1.1\r\nHost: lectern\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n", u.Access)
		var chunked strings.Builder
		for rest := big; len(rest) > 0; {
			n := min(len(rest), 64<<10)
			fmt.Fprintf(&chunked, "%x\r\n%s\r\n", n, rest[:n])
			rest = rest[n:]
		}
		chunked.WriteString("0\r\n\r\n")
		resp, raw := rawRequest(t, addr, head, []byte(chunked.String()), false) //nolint:bodyclose // rawRequest closes it
		wantRawDetail(t, resp, raw, http.StatusRequestEntityTooLarge, "Request body too large")
	})
	wantBody(t, e.do(t, "GET", "/agents", nil, u.Access), http.StatusOK, `{"items":[],"total":0,"page":1,"size":50}`)
}

// sendAndLeave sends a request on a fresh connection and closes it as soon
// as the request is written, as a client that stops (a load run ending)
// does. The request is written on the connection itself, not through an
// http.Transport: a Transport calls httptrace's WroteRequest when the
// request is in its buffer, before it flushes that buffer to the
// connection, and a context cancelled there closes the connection at once,
// so that, when the writing goroutine is slow to run (a loaded machine), no
// byte of the request ever leaves: the server sees a connection without a
// request, which it rightly neither serves nor logs. Request.Write flushes
// before it returns: the whole request is the kernel's to deliver before
// the close (a FIN after it).
func sendAndLeave(t *testing.T, e *env, method, path, body, token string, headers ...string) {
	t.Helper()
	var reader io.Reader
	if body != "" {
		reader = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, reader)
	if err != nil {
		t.Fatal(err)
	}
	req.Close = true // Connection: close, as a client without keep-alives says
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	conn, err := net.DialTimeout("tcp", e.srv.Listener.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if err := req.Write(conn); err != nil {
		t.Fatalf("writing %s %s: %v", method, path, err)
	}
}

// accessLine waits for the request's access-log line. The server gives up
// on the read's X-Min-Position after ConsistencyWait at the latest, so the
// line comes by then with time to spare; a failure shows what the log
// holds of the request.
func accessLine(t *testing.T, e *env, requestID string) map[string]any {
	t.Helper()
	var found map[string]any
	ok := poll.Until(3*pgtest.ConsistencyWait, func() bool {
		for _, line := range e.logs.of(requestID) {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "http" {
				found = m
				return true
			}
		}
		return false
	})
	if !ok {
		t.Fatalf("no access-log line for request %s after %v; its lines: %q", requestID, 3*pgtest.ConsistencyWait, e.logs.of(requestID))
	}
	return found
}

func TestClientThatGoesAway(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)

	t.Run("a read is logged as 499, not as a server error", func(t *testing.T) {
		id := uuid.NewString()
		// The read waits for a position the log has not reached: the client
		// leaves meanwhile.
		sendAndLeave(t, e, "GET", "/agents", "", u.Access, "X-Request-ID", id, "X-Min-Position", "18446744073709551615-0")
		line := accessLine(t, e, id)
		if line["status"] != float64(499) {
			t.Errorf("logged %v, want status 499", line)
		}
		noErrorLogged(t, e, id)
	})
	// The client may leave before the write began (nothing is written:
	// 499) or after (the write is carried to its end: 201); which one is
	// a race with the server noticing. Each outcome must hold what it says,
	// and the write carried to its end must be seen.
	t.Run("a write carried to its end, or not begun", func(t *testing.T) {
		for try := 0; ; try++ {
			if try == 20 {
				t.Fatal("in 20 tries the client always left before the write began")
			}
			id, name := uuid.NewString(), fmt.Sprintf("left behind %d", try)
			sendAndLeave(t, e, "POST", "/agents", fmt.Sprintf(`{"name":%q,"system_prompt":"p"}`, name), u.Access, "X-Request-ID", id)
			line := accessLine(t, e, id)
			noErrorLogged(t, e, id)
			res := agentsAfterAWrite(t, e, u.Access)
			there := strings.Contains(string(res.Body), fmt.Sprintf(`"name":%q`, name))
			switch line["status"] {
			case float64(http.StatusCreated):
				if !there {
					t.Fatalf("logged 201, but the agent whose client left is not there: %s", res)
				}
				return
			case float64(499):
				if there {
					t.Fatalf("logged 499, but the agent was written: %s", res)
				}
			default:
				t.Fatalf("logged %v, want the write's 201 or 499", line)
			}
		}
	})
}

// agentsAfterAWrite lists the caller's agents once the read model has
// applied everything written so far. A write whose client left answers
// without waiting for its projection (the client is not there to read it),
// so a list right after its access-log line may not show it yet: a write
// of the caller's own, made after it, and a read at that write's position
// (X-Min-Position) show all that the left request wrote.
func agentsAfterAWrite(t *testing.T, e *env, token string) response {
	t.Helper()
	probe := e.do(t, "POST", "/agents", map[string]any{"name": "probe " + uuid.NewString(), "system_prompt": "p"}, token)
	if probe.Status != http.StatusCreated {
		t.Fatalf("the probe write: %s", probe)
	}
	res := e.do(t, "GET", "/agents", nil, token, "X-Min-Position", probe.Header.Get("X-Event-Position"))
	if res.Status != http.StatusOK || res.Header.Get("X-Projection-Pending") != "" {
		t.Fatalf("the list at the probe's position: %s (pending %q)", res, res.Header.Get("X-Projection-Pending"))
	}
	return res
}
