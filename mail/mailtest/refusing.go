// Package mailtest serves tests an SMTP server that refuses what it is
// sent, quoting the recipient as real servers do: errors built from its
// replies must not carry the address into logs.
package mailtest

import (
	"io"
	"log"
	"net"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
)

// StartRefusing starts an SMTP server, stopped when t ends, that refuses
// every recipient with a 550 quoting the address (as Postfix does for an
// unknown mailbox) or, atData, accepts the recipient and refuses the
// message with a 452 quoting it; it returns the server's address.
func StartRefusing(t testing.TB, atData bool) string {
	t.Helper()
	srv := smtp.NewServer(refusing{atData: atData})
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	srv.ErrorLog = log.New(io.Discard, "", 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

type refusing struct{ atData bool }

func (b refusing) NewSession(*smtp.Conn) (smtp.Session, error) { return &refusingSession{b: b}, nil }

type refusingSession struct {
	b  refusing
	to string
}

func (s *refusingSession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *refusingSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = to
	if s.b.atData {
		return nil
	}
	return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1},
		Message: "<" + to + ">: Recipient address rejected: User unknown in virtual mailbox table"}
}
func (s *refusingSession) Data(r io.Reader) error {
	_, _ = io.Copy(io.Discard, r)
	return &smtp.SMTPError{Code: 452, EnhancedCode: smtp.EnhancedCode{4, 2, 2},
		Message: "<" + s.to + ">: mailbox full"}
}
func (s *refusingSession) Reset()        {}
func (s *refusingSession) Logout() error { return nil }
