// Package mail sends Lectern's e-mails (sign-up codes and the like) through
// an SMTP server, or, when none is configured, writes them to the log so a
// developer can read them.
package mail

import (
	"context"
	"log/slog"
	"strings"
)

// Message is a plain-text e-mail to one recipient.
type Message struct {
	To      string // recipient address, e.g. "ada@example.com"
	Subject string
	Body    string // plain text
}

// Sender delivers messages. Implementations are safe for concurrent use.
type Sender interface {
	Send(ctx context.Context, m Message) error
}

// Environment variables read by FromEnv.
const (
	EnvSMTPURL  = "LECTERN_SMTP_URL"
	EnvSMTPFrom = "LECTERN_SMTP_FROM"
)

// FromEnv builds the Sender the environment asks for: an SMTP sender when
// LECTERN_SMTP_URL is set (LECTERN_SMTP_FROM is then required), otherwise
// a log sender writing to logger. See SMTPConfig for the URL format.
func FromEnv(getenv func(string) string, logger *slog.Logger) (Sender, error) {
	url := strings.TrimSpace(getenv(EnvSMTPURL))
	if url == "" {
		return NewLogSender(logger), nil
	}
	return NewSMTPSender(SMTPConfig{URL: url, From: strings.TrimSpace(getenv(EnvSMTPFrom))})
}

// logSender writes each message to a logger instead of sending it.
type logSender struct {
	logger *slog.Logger
}

// NewLogSender returns a Sender that writes each message as one INFO log
// line with message "email" and attributes to, subject and body. The whole
// body is logged, secrets included, so that in development a sign-up code
// can be read from the log: never use it where logs are shared. A nil logger
// means slog.Default().
func NewLogSender(logger *slog.Logger) Sender {
	if logger == nil {
		logger = slog.Default()
	}
	return logSender{logger: logger}
}

// Send logs m; it never fails.
func (s logSender) Send(ctx context.Context, m Message) error {
	s.logger.LogAttrs(ctx, slog.LevelInfo, "email",
		slog.String("to", m.To),
		slog.String("subject", m.Subject),
		slog.String("body", m.Body),
	)
	return nil
}
