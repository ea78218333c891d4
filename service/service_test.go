package service_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
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
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	svc, err := service.New(service.Config{Pool: pool, JWTKey: key, Mail: mail.NewLogSender(quiet), Logger: quiet, EventStoreURL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	stop := svc.RunBackground(context.Background(), true)
	t.Cleanup(stop)
	srv := httptest.NewServer(svc.Handler)
	t.Cleanup(srv.Close)

	if _, _, err := svc.Identity.CreateUser(context.Background(), "ada@example.com", "correct horse", "Ada", false); err != nil {
		t.Fatal(err)
	}
	post := func(path, token, body string) (*http.Response, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(res.Body).Decode(&out)
		return res, out
	}
	res, tokens := post("/user/login", "", `{"email":"ada@example.com","password":"correct horse"}`)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("login: %d %v", res.StatusCode, tokens)
	}
	token := tokens["access_token"].(string)
	res, agent := post("/agents", token, `{"name":"Tutor","system_prompt":"Be kind"}`)
	if res.StatusCode != http.StatusCreated || res.Header.Get("X-Projection-Pending") != "" || res.Header.Get("X-Event-Position") == "" {
		t.Fatalf("create agent: %d %v pending=%q position=%q", res.StatusCode, agent, res.Header.Get("X-Projection-Pending"), res.Header.Get("X-Event-Position"))
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/agents", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	got, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Body.Close()
	var list struct {
		Total int `json:"total"`
	}
	_ = json.NewDecoder(got.Body).Decode(&list)
	if got.StatusCode != http.StatusOK || list.Total != 1 {
		t.Fatalf("GET /agents right after the write: %d, total %d", got.StatusCode, list.Total)
	}
}
