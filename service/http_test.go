package service_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"lectern/mail"
	"lectern/pgtest"
	"lectern/poll"
	"lectern/service"
)

// serve starts cfg's service with its projections and an HTTP server, with
// quiet logs, mail to the log and a fresh JWT key where cfg sets none. stop
// shuts it all down (at the test's end if not before).
func serve(t *testing.T, cfg service.Config) (svc *service.Service, url string, stop func()) {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	if cfg.Mail == nil {
		cfg.Mail = mail.NewLogSender(quiet)
	}
	if cfg.JWTKey == nil {
		cfg.JWTKey = make([]byte, 32)
		_, _ = rand.Read(cfg.JWTKey)
	}
	if cfg.ConsistencyWait == 0 {
		cfg.ConsistencyWait = pgtest.ConsistencyWait
	}
	svc, err := service.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stopBackground := svc.RunBackground(context.Background(), true)
	srv := httptest.NewServer(svc.Handler)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			srv.Close()
			stopBackground()
			svc.Close()
		})
	}
	t.Cleanup(stop)
	return svc, srv.URL, stop
}

// send makes one request of a service under test (a JSON body, a bearer
// token when given) and returns its status, headers and body.
func send(method, url, token string, body []byte) (int, http.Header, []byte, error) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, data, err
}

// The service's pools name their connections, so that an operator reading
// pg_stat_activity tells the projections' and the forwarder's from others.
func TestPoolsNameTheirConnections(t *testing.T) {
	pool := pgtest.Fresh(t)
	_, _, stop := serve(t, service.Config{Pool: pool})
	defer stop()
	for _, name := range []string{service.ProjectionsApplicationName, service.DownstreamApplicationName} {
		poll.Must(t, 20*time.Second, "a connection named "+name, func() bool {
			var n int
			if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND application_name = $1`, name).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n > 0
		})
	}
}
