package mail

import (
	"context"
	"errors"
	"strings"
	"testing"

	gomail "github.com/wneessen/go-mail"

	"lectern/mail/mailtest"
)

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
			addr := mailtest.StartRefusing(t, tc.atData)

			s := newTestSender(t, "smtp://"+addr, nil)
			m := testMessage
			m.To = "ann.marker@example.com"
			err := s.Send(context.Background(), m)
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
