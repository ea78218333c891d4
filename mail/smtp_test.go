package mail

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log"
	"math/big"
	"mime"
	"mime/quotedprintable"
	"net"
	netmail "net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/google/go-cmp/cmp"
)

// received is one message as the test server saw it.
type received struct {
	From    string
	To      []string
	Subject string
	Body    string
	User    string // authenticated user, "" if none
	TLS     bool
}

// testServer is an in-process SMTP server that records what it receives.
type testServer struct {
	addr       string
	user, pass string // required credentials; "" means no AUTH offered

	mu        sync.Mutex
	msgs      []received
	passwords []string // every password a client tried
}

type serverOptions struct {
	user, pass        string
	startTLS          *tls.Config // offered via STARTTLS
	implicitTLS       *tls.Config // wraps the listener
	allowInsecureAuth bool
}

func startServer(t *testing.T, o serverOptions) *testServer {
	t.Helper()
	ts := &testServer{user: o.user, pass: o.pass}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		_, isTLS := c.TLSConnectionState()
		return &session{srv: ts, conn: c, tls: isTLS}, nil
	}))
	srv.Domain = "localhost"
	srv.TLSConfig = o.startTLS
	srv.AllowInsecureAuth = o.allowInsecureAuth
	srv.ReadTimeout = 10 * time.Second
	srv.WriteTimeout = 10 * time.Second
	srv.ErrorLog = log.New(io.Discard, "", 0)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if o.implicitTLS != nil {
		ln = tls.NewListener(ln, o.implicitTLS)
	}
	ts.addr = ln.Addr().String()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ts
}

func (ts *testServer) messages() []received {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]received(nil), ts.msgs...)
}

func (ts *testServer) triedPasswords() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]string(nil), ts.passwords...)
}

type session struct {
	srv  *testServer
	conn *smtp.Conn
	tls  bool
	user string
	cur  received
}

func (s *session) AuthMechanisms() []string {
	if s.srv.user == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (s *session) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		s.srv.mu.Lock()
		s.srv.passwords = append(s.srv.passwords, pass)
		s.srv.mu.Unlock()
		if user != s.srv.user || pass != s.srv.pass {
			return smtp.ErrAuthFailed
		}
		s.user = user
		return nil
	}), nil
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	if s.srv.user != "" && s.user == "" {
		return smtp.ErrAuthRequired
	}
	_, isTLS := s.conn.TLSConnectionState()
	s.cur = received{From: from, User: s.user, TLS: s.tls || isTLS}
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.cur.To = append(s.cur.To, to)
	return nil
}

// Data parses the message and decodes subject and body, so tests compare
// what a mail reader would show.
func (s *session) Data(r io.Reader) error {
	m, err := netmail.ReadMessage(r)
	if err != nil {
		return err
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	if err != nil {
		return err
	}
	body := m.Body
	switch strings.ToLower(m.Header.Get("Content-Transfer-Encoding")) {
	case "quoted-printable":
		body = quotedprintable.NewReader(m.Body)
	case "", "7bit", "8bit":
	default:
		return errors.New("unexpected transfer encoding " + m.Header.Get("Content-Transfer-Encoding"))
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	s.cur.Subject = subject
	s.cur.Body = strings.ReplaceAll(string(b), "\r\n", "\n")
	s.srv.mu.Lock()
	s.srv.msgs = append(s.srv.msgs, s.cur)
	s.srv.mu.Unlock()
	return nil
}

func (s *session) Reset()        { s.cur = received{} }
func (s *session) Logout() error { return nil }

// testTLS returns a server config with a fresh self-signed certificate for
// 127.0.0.1 and a client config trusting it.
func testTLS(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "lectern test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	server = &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: priv, Leaf: cert}},
		MinVersion:   tls.VersionTLS12,
	}
	client = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	return server, client
}

func newTestSender(t *testing.T, url string, clientTLS *tls.Config) *smtpSender {
	t.Helper()
	s, err := NewSMTPSender(SMTPConfig{URL: url, From: "Lectern <noreply@lectern.test>"})
	if err != nil {
		t.Fatal(err)
	}
	ss := s.(*smtpSender)
	ss.tlsConfig = clientTLS
	return ss
}

var testMessage = Message{
	To:      "ada@example.com",
	Subject: "Your Lectern code: 042917 ✓",
	Body:    "Hello Ada,\n\nyour sign-up code is 042917.\nA line with = and a long one " + strings.Repeat("x", 100) + "\n",
}

func wantReceived(user string, tls bool) []received {
	return []received{{
		From:    "noreply@lectern.test",
		To:      []string{"ada@example.com"},
		Subject: testMessage.Subject,
		Body:    testMessage.Body,
		User:    user,
		TLS:     tls,
	}}
}

func TestSMTPPlainRelay(t *testing.T) {
	srv := startServer(t, serverOptions{})
	s := newTestSender(t, "smtp://"+srv.addr, nil)
	if err := s.Send(context.Background(), testMessage); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantReceived("", false), srv.messages()); diff != "" {
		t.Errorf("server received (-want +got):\n%s", diff)
	}
}

func TestSMTPStartTLSWithAuth(t *testing.T) {
	serverTLS, clientTLS := testTLS(t)
	srv := startServer(t, serverOptions{user: "lectern", pass: "s3cret/pw", startTLS: serverTLS})
	s := newTestSender(t, "smtp://lectern:s3cret%2Fpw@"+srv.addr, clientTLS)
	if err := s.Send(context.Background(), testMessage); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantReceived("lectern", true), srv.messages()); diff != "" {
		t.Errorf("server received (-want +got):\n%s", diff)
	}
}

func TestSMTPImplicitTLS(t *testing.T) {
	serverTLS, clientTLS := testTLS(t)
	srv := startServer(t, serverOptions{user: "lectern", pass: "pw", implicitTLS: serverTLS})
	s := newTestSender(t, "smtps://lectern:pw@"+srv.addr, clientTLS)
	if err := s.Send(context.Background(), testMessage); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantReceived("lectern", true), srv.messages()); diff != "" {
		t.Errorf("server received (-want +got):\n%s", diff)
	}
}

// The certificate is checked: without the test CA the send fails.
func TestSMTPVerifiesCertificate(t *testing.T) {
	serverTLS, _ := testTLS(t)
	srv := startServer(t, serverOptions{implicitTLS: serverTLS})
	s := newTestSender(t, "smtps://"+srv.addr, nil)
	if err := s.Send(context.Background(), testMessage); err == nil {
		t.Error("send succeeded against an untrusted certificate")
	}
	if n := len(srv.messages()); n != 0 {
		t.Errorf("server received %d messages", n)
	}
}

// With credentials but no TLS on offer, the password must not go out in
// the clear: the send fails instead.
func TestSMTPNoPlaintextPassword(t *testing.T) {
	srv := startServer(t, serverOptions{user: "lectern", pass: "pw", allowInsecureAuth: true})
	s := newTestSender(t, "smtp://lectern:pw@"+srv.addr, nil)
	if err := s.Send(context.Background(), testMessage); err == nil {
		t.Error("send succeeded")
	}
	if got := srv.triedPasswords(); len(got) != 0 {
		t.Errorf("password sent over plain text: %q", got)
	}
}

func TestSMTPWrongPassword(t *testing.T) {
	serverTLS, clientTLS := testTLS(t)
	srv := startServer(t, serverOptions{user: "lectern", pass: "pw", startTLS: serverTLS})
	s := newTestSender(t, "smtp://lectern:nope@"+srv.addr, clientTLS)
	if err := s.Send(context.Background(), testMessage); err == nil {
		t.Error("send with a wrong password succeeded")
	}
	if n := len(srv.messages()); n != 0 {
		t.Errorf("server received %d messages", n)
	}
}

func TestSMTPRejectsBadMessages(t *testing.T) {
	srv := startServer(t, serverOptions{})
	s := newTestSender(t, "smtp://"+srv.addr, nil)
	for name, m := range map[string]Message{
		"no recipient":       {Subject: "s", Body: "b"},
		"bad recipient":      {To: "not an address", Subject: "s", Body: "b"},
		"header in subject":  {To: "ada@example.com", Subject: "hi\r\nBcc: eve@example.com", Body: "b"},
		"header in receiver": {To: "ada@example.com\r\nBcc: eve@example.com", Subject: "s", Body: "b"},
	} {
		if err := s.Send(context.Background(), m); err == nil {
			t.Errorf("%s: send succeeded", name)
		}
	}
	if n := len(srv.messages()); n != 0 {
		t.Errorf("server received %d messages", n)
	}
}

func TestSMTPCanceledContext(t *testing.T) {
	srv := startServer(t, serverOptions{})
	s := newTestSender(t, "smtp://"+srv.addr, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Send(ctx, testMessage); err == nil {
		t.Error("send with a canceled context succeeded")
	}
}

func TestSMTPConfig(t *testing.T) {
	const from = "noreply@example.com"
	good := []struct {
		url      string
		host     string
		port     int
		implicit bool
		user     string
		pass     string
	}{
		{"smtp://localhost", "localhost", 587, false, "", ""},
		{"smtp://relay:25", "relay", 25, false, "", ""},
		{"smtp://user:pa%40ss@mail.example.com:587", "mail.example.com", 587, false, "user", "pa@ss"},
		{"smtps://mail.example.com", "mail.example.com", 465, true, "", ""},
		{"smtps://u:p@[::1]:2465/", "::1", 2465, true, "u", "p"},
	}
	for _, c := range good {
		s, err := parseSMTPConfig(SMTPConfig{URL: c.url, From: from})
		if err != nil {
			t.Errorf("%s: %v", c.url, err)
			continue
		}
		if s.host != c.host || s.port != c.port || s.implicitTLS != c.implicit || s.user != c.user || s.pass != c.pass {
			t.Errorf("%s: got host %q port %d implicit %v user %q pass %q", c.url, s.host, s.port, s.implicitTLS, s.user, s.pass)
		}
	}

	bad := []struct {
		url, from string
		want      []string // substrings, one per expected problem
	}{
		{"", from, []string{"URL is empty"}},
		{"smtp://h", "", []string{"From address is empty"}},
		{"", "", []string{"URL is empty", "From address is empty"}},
		{"http://h", from, []string{`scheme "http"`}},
		{"h:25", from, []string{`scheme "h"`, "must look like", "no host"}},
		{"smtp://h:0", from, []string{`port "0"`}},
		{"smtp://h:99999", from, []string{`port "99999"`}},
		{"smtp://:25", from, []string{"no host"}},
		{"smtp://user@h", from, []string{`user name "user" but no password`}},
		{"smtp://:topsecret@h", from, []string{"password but no user name"}},
		{"smtp://h/path", from, []string{"path"}},
		{"smtp://h?tls=1", from, []string{"query"}},
		{"smtp://h#x", from, []string{"fragment"}},
		{"smtp://u:topsecret@h:bad", from, []string{"does not parse"}},
		{"smtp://h", "not an address", []string{"From address"}},
		{"ftp://u:topsecret@:0/x?y", "nope", []string{"scheme", "no host", "port", "path", "query", "From address"}},
	}
	for _, c := range bad {
		_, err := NewSMTPSender(SMTPConfig{URL: c.url, From: c.from})
		if err == nil {
			t.Errorf("URL %q From %q accepted", c.url, c.from)
			continue
		}
		msg := err.Error()
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("URL %q From %q: error %q does not mention %q", c.url, c.from, msg, w)
			}
		}
		if lines := strings.Count(msg, "\n") + 1; lines != len(c.want) {
			t.Errorf("URL %q From %q: %d problems reported, want %d:\n%s", c.url, c.from, lines, len(c.want), msg)
		}
		if strings.Contains(msg, "topsecret") {
			t.Errorf("URL %q: error reveals the password: %s", c.url, msg)
		}
	}
}
