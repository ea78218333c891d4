package mail

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	gomail "github.com/wneessen/go-mail"
)

// refusing is an SMTP backend whose server refuses every recipient, or
// the message (DATA), quoting the address as Postfix does.
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

// A delivery the server refuses fails with an error that names neither the
// recipient nor the server's reply quoting it (the caller logs it, and the
// log outlives an erasure), and still says what failed: the step, the
// server's codes, whether to try again.
func TestSMTPRefusalNamesNoRecipient(t *testing.T) {
	for _, tc := range []struct {
		name   string
		atData bool
		want   string
		temp   bool
	}{
		{"recipient refused", false, "sending SMTP RCPT TO command: the server answered 550 5.1.1", false},
		{"message refused", true, "the server answered 452 4.2.2 (temporary)", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := smtp.NewServer(refusing{atData: tc.atData})
			srv.Domain = "localhost"
			srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
			srv.ErrorLog = log.New(io.Discard, "", 0)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go func() { _ = srv.Serve(ln) }()
			t.Cleanup(func() { _ = srv.Close() })

			s := newTestSender(t, "smtp://"+ln.Addr().String(), nil)
			m := testMessage
			m.To = "ann.marker@example.com"
			err = s.Send(context.Background(), m)
			if err == nil {
				t.Fatal("a refused delivery succeeded")
			}
			if strings.Contains(strings.ToLower(err.Error()), "ann.marker") {
				t.Errorf("the error names the recipient: %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("the error %q does not say %q", err, tc.want)
			}
			var sendErr *gomail.SendError
			if !errors.As(err, &sendErr) || sendErr.IsTemp() != tc.temp {
				t.Errorf("go-mail's error is not reachable, or not temporary=%v: %v", tc.temp, err)
			}
		})
	}
	// An address go-mail cannot parse: not quoted either.
	s := newTestSender(t, "smtp://127.0.0.1:1", nil)
	err := s.Send(context.Background(), Message{To: "ann marker <", Subject: "s", Body: "b"})
	if err == nil || strings.Contains(err.Error(), "marker") {
		t.Errorf("an address that does not parse: %v", err)
	}
}
