package mail

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLogSender(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	body := "Your Lectern code is 042917.\n\nIt expires in 15 minutes."
	err := NewLogSender(logger).Send(context.Background(), Message{
		To: "ada@example.com", Subject: "Your sign-up code", Body: body,
	})
	if err != nil {
		t.Fatal(err)
	}

	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 1 {
		t.Fatalf("logged %d lines, want 1:\n%s", len(lines), buf.String())
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatal(err)
	}
	delete(got, "time")
	want := map[string]any{
		"level":   "INFO",
		"msg":     "email",
		"to":      "ada@example.com",
		"subject": "Your sign-up code",
		"body":    body,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log line mismatch (-want +got):\n%s", diff)
	}
}

func TestFromEnv(t *testing.T) {
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	logger := slog.New(slog.DiscardHandler)

	s, err := FromEnv(env(nil), logger)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(logSender); !ok {
		t.Errorf("no URL: got %T, want the log sender", s)
	}

	s, err = FromEnv(env(map[string]string{
		EnvSMTPURL:  "smtp://relay.internal:25",
		EnvSMTPFrom: "Lectern <noreply@example.com>",
	}), logger)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := s.(*smtpSender); !ok || got.host != "relay.internal" || got.port != 25 {
		t.Errorf("SMTP env: got %#v", s)
	}

	if _, err := FromEnv(env(map[string]string{EnvSMTPURL: "smtp://relay.internal"}), logger); err == nil {
		t.Error("URL without From accepted")
	}
}
