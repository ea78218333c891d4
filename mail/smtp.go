package mail

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	netmail "net/mail"
	"net/url"
	"strconv"
	"strings"
	"time"

	gomail "github.com/wneessen/go-mail"
)

// Default ports when the URL names none: submission for smtp://, implicit
// TLS submission for smtps://.
const (
	defaultSMTPPort  = 587
	defaultSMTPSPort = 465
)

// smtpTimeout bounds one delivery (connect, TLS, auth, send) when the
// caller's context has no earlier deadline.
const smtpTimeout = 30 * time.Second

// SMTPConfig says how to reach the SMTP server.
//
// URL is smtp://[user:password@]host[:port] or
// smtps://[user:password@]host[:port]. Special characters in the user name
// or password must be percent-encoded.
//   - smtp:// uses STARTTLS when the server offers it (port 587 unless
//     given). Without credentials it also works with a plain local relay.
//     With credentials, mechanisms that send the password in the clear
//     (PLAIN, LOGIN) are only used once TLS is up, so a server without
//     STARTTLS will fail authentication rather than receive the password.
//   - smtps:// uses TLS from the first byte (port 465 unless given).
//
// Server certificates are always verified.
//
// From is the sender, "noreply@example.com" or
// "Lectern <noreply@example.com>".
type SMTPConfig struct {
	URL  string
	From string
}

// smtpSender sends through an SMTP server; see NewSMTPSender.
type smtpSender struct {
	host        string
	port        int
	implicitTLS bool
	user, pass  string
	from        string
	// tlsConfig overrides go-mail's default (verify against system roots);
	// only tests set it, to trust their own server's certificate.
	tlsConfig *tls.Config
}

// NewSMTPSender checks cfg and returns a Sender that delivers each message
// over a new SMTP connection. Every problem found in cfg is reported, joined
// with errors.Join; the password never appears in an error.
func NewSMTPSender(cfg SMTPConfig) (Sender, error) {
	s, err := parseSMTPConfig(cfg)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func parseSMTPConfig(cfg SMTPConfig) (*smtpSender, error) {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf("mail: "+format, args...)) }
	s := &smtpSender{}

	if strings.TrimSpace(cfg.URL) == "" {
		fail("SMTP URL is empty")
	} else if u, err := url.Parse(cfg.URL); err != nil {
		// url.Error repeats the whole URL, password included: keep only
		// the reason.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		fail("SMTP URL does not parse: %v", err)
	} else {
		switch u.Scheme {
		case "smtp":
			s.port = defaultSMTPPort
		case "smtps":
			s.port, s.implicitTLS = defaultSMTPSPort, true
		default:
			fail("SMTP URL scheme %q is not supported, use smtp:// or smtps://", u.Scheme)
		}
		if u.Opaque != "" {
			fail("SMTP URL must look like smtp://host:port")
		}
		s.host = u.Hostname()
		if s.host == "" {
			fail("SMTP URL has no host")
		}
		if p := u.Port(); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 || n > 65535 {
				fail("SMTP URL port %q is not a number from 1 to 65535", p)
			}
			s.port = n
		}
		if u.User != nil {
			s.user = u.User.Username()
			pass, hasPass := u.User.Password()
			s.pass = pass
			switch {
			case s.user == "":
				fail("SMTP URL has a password but no user name")
			case !hasPass || pass == "":
				fail("SMTP URL has user name %q but no password", s.user)
			}
		}
		if u.Path != "" && u.Path != "/" {
			fail("SMTP URL must not have a path (%q)", u.Path)
		}
		if u.RawQuery != "" || u.ForceQuery {
			fail("SMTP URL must not have a query")
		}
		if u.Fragment != "" {
			fail("SMTP URL must not have a fragment")
		}
	}

	if strings.TrimSpace(cfg.From) == "" {
		fail("SMTP From address is empty")
	} else if _, err := netmail.ParseAddress(cfg.From); err != nil {
		fail("SMTP From address %q is not valid: %v", cfg.From, err)
	}
	s.from = cfg.From

	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// Send delivers m over a new connection. ctx bounds the whole exchange;
// without a deadline, 30 seconds apply.
func (s *smtpSender) Send(ctx context.Context, m Message) error {
	// Reject header injection outright instead of relying on encoding.
	if strings.ContainsAny(m.To, "\r\n") || strings.ContainsAny(m.Subject, "\r\n") {
		return errors.New("mail: recipient and subject must be single lines")
	}
	msg := gomail.NewMsg()
	if err := msg.From(s.from); err != nil {
		return fmt.Errorf("mail: from address: %w", err)
	}
	if err := msg.To(m.To); err != nil {
		// Neither the address nor go-mail's error, which quotes it: the
		// log, which erasure cannot reach, keeps this.
		return errors.New("mail: the recipient's address cannot be sent to")
	}
	msg.Subject(m.Subject)
	msg.SetDate()
	msg.SetMessageID()
	msg.SetBodyString(gomail.TypeTextPlain, m.Body)

	client, err := s.client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, smtpTimeout)
	defer cancel()
	if err := client.DialAndSendWithContext(ctx, msg); err != nil {
		hint := ""
		if errors.Is(err, gomail.ErrNoSupportedAuthDiscovered) {
			hint = " (the password is only sent over TLS or with a challenge-response mechanism; does the server offer STARTTLS, or should the URL be smtps://?)"
		}
		// Not the address: the log, which erasure cannot reach, keeps this.
		return fmt.Errorf("mail: sending via %s:%d: %w%s", s.host, s.port, withoutRecipient(err), hint)
	}
	return nil
}

// withoutRecipient is err without what names the recipient. go-mail's
// SendError lists the recipients it concerns and quotes the server's reply,
// which names them too ("550 5.1.1 <ann@example.com>: Recipient address
// rejected"): of it, only the step that failed, the reply's codes and
// whether it is temporary are kept. Other errors (dialling, TLS,
// authentication) hold no address and are kept whole.
func withoutRecipient(err error) error {
	var sendErr *gomail.SendError
	if !errors.As(err, &sendErr) {
		return err
	}
	return &deliveryError{err: sendErr}
}

// deliveryError is a SendError told without its recipients and reply text.
type deliveryError struct{ err *gomail.SendError }

func (e *deliveryError) Error() string {
	msg := e.err.Reason.String()
	if code := e.err.ErrorCode(); code != 0 {
		msg += ": the server answered " + strconv.Itoa(code)
		if esc := e.err.EnhancedStatusCode(); esc != "" {
			msg += " " + esc
		}
	}
	if e.err.IsTemp() {
		msg += " (temporary)"
	}
	return msg
}

// Unwrap keeps errors.Is and errors.As reaching go-mail's error.
func (e *deliveryError) Unwrap() error { return e.err }

// client builds a go-mail client per message: cheap, and it keeps
// concurrent sends from sharing connection state.
func (s *smtpSender) client() (*gomail.Client, error) {
	opts := []gomail.Option{
		gomail.WithPort(s.port),
		gomail.WithTimeout(smtpTimeout),
	}
	if s.implicitTLS {
		opts = append(opts, gomail.WithSSL())
	} else {
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSOpportunistic))
	}
	if s.tlsConfig != nil {
		opts = append(opts, gomail.WithTLSConfig(s.tlsConfig))
	}
	if s.user != "" {
		// Auto-discovery picks the strongest mechanism offered and never
		// PLAIN or LOGIN on an unencrypted connection.
		opts = append(opts,
			gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover),
			gomail.WithUsername(s.user),
			gomail.WithPassword(s.pass),
		)
	}
	c, err := gomail.NewClient(s.host, opts...)
	if err != nil {
		return nil, fmt.Errorf("mail: SMTP client: %w", err)
	}
	return c, nil
}
