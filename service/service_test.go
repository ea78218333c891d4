package service_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"lectern/eventstore/esdbfake"
	"lectern/mail"
	"lectern/pgtest"
	"lectern/service"
)

// The service runs on EventStoreDB when EVENTSTORE_URL names one: writes are
// appended there, the projections follow it, and a write is readable as soon
// as it answers.
func TestServiceOnEventStoreDB(t *testing.T) {
	url := esdbfake.Start(t)
	pool := pgtest.Fresh(t)
	svc, base, _ := serve(t, service.Config{Pool: pool, EventStoreURL: url})

	if _, _, err := svc.Identity.CreateUser(context.Background(), "ada@example.com", "correct horse", "Ada", false); err != nil {
		t.Fatal(err)
	}
	call := func(method, path, token, body string) (int, http.Header, map[string]any) {
		t.Helper()
		status, header, data, err := send(method, base+path, token, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		_ = json.Unmarshal(data, &out)
		return status, header, out
	}
	status, _, tokens := call("POST", "/user/login", "", `{"email":"ada@example.com","password":"correct horse"}`)
	if status != http.StatusOK {
		t.Fatalf("login: %d %v", status, tokens)
	}
	token := tokens["access_token"].(string)
	status, header, agent := call("POST", "/agents", token, `{"name":"Tutor","system_prompt":"Be kind"}`)
	if status != http.StatusCreated || header.Get("X-Projection-Pending") != "" || header.Get("X-Event-Position") == "" {
		t.Fatalf("create agent: %d %v pending=%q position=%q", status, agent, header.Get("X-Projection-Pending"), header.Get("X-Event-Position"))
	}
	status, _, list := call("GET", "/agents", token, "")
	if total, _ := list["total"].(float64); status != http.StatusOK || total != 1 {
		t.Fatalf("GET /agents right after the write: %d, total %v", status, list["total"])
	}
}

// EVENTSTORE_URL either names an EventStoreDB, or is empty for PostgreSQL: a
// value that is neither stops the service instead of quietly choosing
// PostgreSQL.
func TestEventStoreURLRule(t *testing.T) {
	for url, want := range map[string]bool{"": false, "esdb://localhost:2113?tls=false": true, "esdb+discover://cluster:2113": true} {
		if got, err := service.UsesEventStoreDB(url); err != nil || got != want {
			t.Errorf("%q: EventStoreDB %v, %v; want %v", url, got, err, want)
		}
	}
	for _, url := range []string{"postgres://localhost/lectern", "esdb:/typo", "localhost:2113"} {
		if _, err := service.UsesEventStoreDB(url); err == nil || !strings.Contains(err.Error(), "EVENTSTORE_URL") {
			t.Errorf("%q: want an error naming EVENTSTORE_URL, got %v", url, err)
		}
		quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
		_, err := service.New(service.Config{Pool: pgtest.Pool(t), JWTKey: make([]byte, 32), Mail: mail.NewLogSender(quiet), Logger: quiet, EventStoreURL: url})
		if err == nil || !strings.Contains(err.Error(), "EVENTSTORE_URL") {
			t.Errorf("service.New with %q: want an error naming EVENTSTORE_URL, got %v", url, err)
		}
	}
}
