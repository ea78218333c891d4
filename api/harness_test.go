package api_test

// The harness: one Lectern service per test package, served over real HTTP,
// and a client whose every response is checked against the OpenAPI document
// the service itself serves at GET /openapi.json.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"lectern/auth"
	"lectern/clocktest"
	"lectern/commands"
	"lectern/eventstore"
	"lectern/eventstore/esdb"
	"lectern/eventstore/esdbfake"
	"lectern/eventstore/postgres"
	"lectern/knowledge"
	"lectern/mail"
	"lectern/personal"
	"lectern/pgtest"
	"lectern/ratelimit"
	"lectern/service"
)

func TestMain(m *testing.M) {
	// The suite signs up hundreds of users: at the real argon2id cost,
	// hashing was most of its CPU under -race. Hashes record their cost,
	// so every check below still verifies what it is given.
	auth.UseCheapHashesInTests()
	code := m.Run()
	if shared != nil {
		shared.stop()
	}
	if fakeStore.store != nil {
		_ = fakeStore.store.Close()
	}
	if fakeStore.srv != nil {
		fakeStore.srv.Close()
	}
	pgtest.Cleanup()
	os.Exit(code)
}

// notInDocument are the operational routes, and the practice page, that
// the OpenAPI document leaves out.
func notInDocument(pattern string) bool {
	return pattern == "/openapi.json" || pattern == "/healthz" || pattern == "/readyz" || pattern == "/metrics" || strings.HasPrefix(pattern, "/docs") ||
		pattern == "/" || pattern == "/app" || strings.HasPrefix(pattern, "/app/")
}

var (
	sharedOnce sync.Once
	shared     *env
)

// sharedEnv is the package's service, started by the first test that needs it.
// It runs the projections; every other service of the package is an HTTP tier
// on the same database that relies on them.
func sharedEnv(t testing.TB) *env {
	t.Helper()
	sharedOnce.Do(func() {
		shared = startEnv(t, envConfig{projections: true})
	})
	if shared == nil {
		t.Fatal("the shared service failed to start (see the first test that failed)")
	}
	return shared
}

// newEnv starts another service on the package's database, stopped when t
// ends: for a clock the test controls, or another configuration. The shared
// service's projections serve its reads. Its client sends from a loopback
// address of its own, so that per-address rate limits on its clock never
// meet another service's.
func newEnv(t testing.TB, cfg envConfig) *env {
	t.Helper()
	sharedEnv(t)
	cfg.projections = false
	e := startEnv(t, cfg)
	t.Cleanup(e.stop)
	return e.from(t)
}

// fakeStore is the package's fake EventStoreDB when LECTERN_TEST_EVENT_STORE
// is esdbfake: one for the package, as the database is one (projection
// checkpoints live in it, and stream ids come from its sequences).
var fakeStore struct {
	once  sync.Once
	srv   *esdbfake.Server
	store *esdb.Store // the tests' own client, for reading streams
	err   error
}

// eventStoreURL is the service's EventStoreURL as LECTERN_TEST_EVENT_STORE
// selects: unset or "postgres", the PostgreSQL store; "esdbfake", the
// package's fake EventStoreDB.
func eventStoreURL(t testing.TB) string {
	t.Helper()
	switch v := os.Getenv("LECTERN_TEST_EVENT_STORE"); v {
	case "", "postgres":
		return ""
	case "esdbfake":
		fakeStore.once.Do(func() {
			if fakeStore.srv, fakeStore.err = esdbfake.New(); fakeStore.err != nil {
				return
			}
			fakeStore.store, fakeStore.err = esdb.Open(context.Background(), fakeStore.srv.URL())
		})
		if fakeStore.err != nil {
			t.Fatal(fakeStore.err)
		}
		return fakeStore.srv.URL()
	default:
		t.Fatalf("LECTERN_TEST_EVENT_STORE=%q: want postgres or esdbfake", v)
		return ""
	}
}

// events is the event store the services of the package append to, for tests
// that read streams directly: read as the services read it, personal fields
// opened with the package's data key.
func (e *env) events(t testing.TB) eventstore.Store {
	t.Helper()
	return personal.NewStore(e.rawEvents(t), personal.NewSealer(e.keys(t)))
}

// rawEvents is that store as stored: personal fields sealed.
func (e *env) rawEvents(t testing.TB) eventstore.Store {
	t.Helper()
	if eventStoreURL(t) != "" {
		return fakeStore.store
	}
	return postgres.New(e.pool, nil)
}

// keys are the subjects' data keys under the package's data key.
func (e *env) keys(t testing.TB) *personal.Keys {
	t.Helper()
	keys, err := personal.NewKeys(e.pool, dataKey)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

type envConfig struct {
	now         func() time.Time // nil: time.Now
	adminEmails []string
	projections bool
	// addressLimit is the per-minute limit of each client address (0:
	// 100000, since every test's requests come from 127.0.0.1).
	addressLimit int
	limits       commands.Limits // other rate limits (zero fields: the defaults)
	// trustedProxies are the proxies whose forwarding headers count.
	trustedProxies []netip.Prefix
	// forwardedHeader is the one header they write (default X-Forwarded-For).
	forwardedHeader string
	// corsOrigins are the browser origins allowed.
	corsOrigins []string
	// extract bounds document extraction (zero fields: the defaults).
	extract knowledge.ExtractLimits
	// pool is the service's pool (nil: the package's).
	pool *pgxpool.Pool
	// embedder embeds knowledge chunks (nil: the offline embedder).
	embedder knowledge.Embedder
	// writeWait bounds a write (0: the default).
	writeWait time.Duration
	// writeBudget is each user's write budget (zero: the default).
	writeBudget ratelimit.Rate
}

// dataKey is the master key of personal data of every service of the
// package: they share one database, so one set of subject keys.
var dataKey = func() []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic(err)
	}
	return k
}()

// env is one running service and what a test needs to talk to it.
type env struct {
	srv    *httptest.Server
	client *http.Client // nil: srv.Client(); see from
	addr   string       // the client's address; "" is 127.0.0.1
	svc    *service.Service
	pool   *pgxpool.Pool
	mail   *mailbox
	key    []byte // the JWT signing key
	logs   *logLines
	doc    *apiDoc
	stop   func()
}

func startEnv(t testing.TB, cfg envConfig) *env {
	t.Helper()
	e := &env{pool: cfg.pool, mail: &mailbox{}, logs: &logLines{}, key: make([]byte, 32)}
	if e.pool == nil {
		e.pool = pgtest.Pool(t)
	}
	if _, err := rand.Read(e.key); err != nil {
		t.Fatal(err)
	}
	addressLimit := cfg.addressLimit
	if addressLimit == 0 {
		addressLimit = 100000
	}
	svc, err := service.New(service.Config{
		Pool:            e.pool,
		JWTKey:          e.key,
		DataKey:         dataKey,
		AdminEmails:     cfg.adminEmails,
		Mail:            e.mail,
		Logger:          slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:             cfg.now,
		AddressLimit:    addressLimit,
		Limits:          cfg.limits,
		TrustedProxies:  cfg.trustedProxies,
		ForwardedHeader: cfg.forwardedHeader,
		CORSOrigins:     cfg.corsOrigins,
		Extract:         cfg.extract,
		Embedder:        cfg.embedder,
		WriteWait:       cfg.writeWait,
		WriteBudget:     cfg.writeBudget,
		EventStoreURL:   eventStoreURL(t),
		ConsistencyWait: pgtest.ConsistencyWait,
	})
	if err != nil {
		t.Fatalf("service.New: %v", err)
	}
	e.svc = svc
	stopBackground := svc.RunBackground(context.Background(), cfg.projections)
	e.srv = httptest.NewServer(svc.Handler)
	e.stop = func() {
		e.srv.Close()
		stopBackground()
	}
	doc, err := loadDoc(e.srv.URL)
	if err != nil {
		e.stop()
		t.Fatalf("loading the OpenAPI document: %v", err)
	}
	e.doc = doc
	return e
}

// mailbox is the services' mail.Sender: it keeps every message.
type mailbox struct {
	mu   sync.Mutex
	msgs []mail.Message
	down atomic.Bool // the mail server refuses, as an SMTP server out of reach does
}

func (m *mailbox) Send(_ context.Context, msg mail.Message) error {
	if m.down.Load() {
		return errors.New("mail: sending via smtp.invalid:25: dial tcp: connect: connection refused")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.msgs = append(m.msgs, msg)
	return nil
}

var codePattern = regexp.MustCompile(`\b(\d{6})\b`)

// code returns the 6-digit code of the last message sent to addr.
func (m *mailbox) code(t testing.TB, addr string) string {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(m.msgs) - 1; i >= 0; i-- {
		if strings.EqualFold(m.msgs[i].To, addr) {
			match := codePattern.FindStringSubmatch(m.msgs[i].Body)
			if match == nil {
				t.Fatalf("the e-mail to %s holds no 6-digit code: %q", addr, m.msgs[i].Body)
			}
			return match[1]
		}
	}
	t.Fatalf("no e-mail was sent to %s", addr)
	return ""
}

// count is how many messages went to addr.
func (m *mailbox) count(addr string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, msg := range m.msgs {
		if strings.EqualFold(msg.To, addr) {
			n++
		}
	}
	return n
}

// logLines keeps the service's log, so that a test can show the lines of a
// request that failed with a 5xx.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(bytes.TrimSpace(p)))
	return len(p), nil
}

func (l *logLines) of(requestID string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, requestID) {
			out = append(out, line)
		}
	}
	return out
}

// response is what a client saw.
type response struct {
	Method, Path string
	Status       int
	Header       http.Header
	Body         []byte
	JSON         any // the decoded body (numbers as json.Number); nil when empty or not JSON
}

func (r response) String() string {
	return fmt.Sprintf("%s %s → %d %s", r.Method, r.Path, r.Status, r.Body)
}

// do sends a request and checks the response against the OpenAPI document.
// body is nil (no body), a string or []byte (sent as is), an io.Reader (sent
// chunked, without Content-Length) or any other value (sent as JSON).
// headers are name, value pairs.
func (e *env) do(t testing.TB, method, path string, body any, token string, headers ...string) response {
	t.Helper()
	res := e.send(t, method, path, body, token, headers...)
	e.check(t, res)
	return res
}

// httpClient is the client e's requests go out with: e's own (an address of
// its own), or the test server's.
func (e *env) httpClient() *http.Client {
	if e.client != nil {
		return e.client
	}
	return e.srv.Client()
}

// send is do without the document check (for the routes outside the document).
func (e *env) send(t testing.TB, method, path string, body any, token string, headers ...string) response {
	t.Helper()
	var reader io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		reader = strings.NewReader(b)
	case []byte:
		reader = bytes.NewReader(b)
	case io.Reader:
		reader = struct{ io.Reader }{b} // hides the length: sent chunked
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatalf("encoding the request body: %v", err)
		}
		reader = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, e.srv.URL+path, reader)
	if err != nil {
		t.Fatal(err)
	}
	if reader != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if len(headers)%2 != 0 {
		t.Fatalf("headers must be name, value pairs: %q", headers)
	}
	for i := 0; i < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := e.httpClient().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the response: %v", method, path, err)
	}
	res := response{Method: method, Path: path, Status: resp.StatusCode, Header: resp.Header, Body: raw}
	if len(raw) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		res.JSON, err = decodeJSON(raw)
		if err != nil {
			t.Errorf("%s: the body is not JSON: %v", res, err)
		}
	}
	if res.Status >= 500 {
		t.Errorf("%s: a 500 is always a defect; the service logged:\n%s", res,
			strings.Join(e.logs.of(resp.Header.Get("X-Request-ID")), "\n"))
	}
	return res
}

func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("data after the JSON value")
	}
	return v, nil
}

// check validates a response against the document: the status must be one
// the operation lists, and the body must match that status's schema.
func (e *env) check(t testing.TB, res response) {
	t.Helper()
	u, err := url.Parse(res.Path)
	if err != nil {
		t.Fatal(err)
	}
	// chi routes on the escaped path when it differs (%2F in a segment).
	routePath := u.Path
	if u.RawPath != "" {
		routePath = u.RawPath
	}
	rctx := chi.NewRouteContext()
	if !e.svc.Handler.Router().Match(rctx, res.Method, routePath) {
		// Unknown routes and wrong methods answer with the ErrorDetail shape.
		if res.Status != http.StatusNotFound && res.Status != http.StatusMethodNotAllowed {
			t.Errorf("%s: no route matches, yet the status is not 404 or 405", res)
			return
		}
		e.doc.validate(t, res, "#/components/schemas/ErrorDetail")
		return
	}
	pattern := rctx.RoutePattern()
	if notInDocument(pattern) {
		return
	}
	op, ok := e.doc.Paths[pattern][strings.ToLower(res.Method)]
	if !ok {
		t.Errorf("%s: the route %s %s is served but not in the OpenAPI document", res, res.Method, pattern)
		return
	}
	status := strconv.Itoa(res.Status)
	spec, ok := op.Responses[status]
	if !ok {
		documented := make([]string, 0, len(op.Responses))
		for s := range op.Responses {
			documented = append(documented, s)
		}
		slices.Sort(documented)
		t.Errorf("%s: status %d is not in the OpenAPI document for %s (%s %s documents %s)",
			res, res.Status, op.OperationID, res.Method, pattern, strings.Join(documented, ", "))
		return
	}
	if _, ok := spec.Content["application/json"]; !ok {
		if len(res.Body) != 0 {
			t.Errorf("%s: the document gives %d no body, yet the response has one", res, res.Status)
		}
		return
	}
	e.doc.validate(t, res, "#/paths/"+escapePointer(pattern)+"/"+strings.ToLower(res.Method)+
		"/responses/"+status+"/content/application~1json/schema")
}

func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// docURL names the document inside the schema compiler.
const docURL = "https://lectern.invalid/openapi.json"

// apiDoc is the served OpenAPI document, with a compiler for its schemas.
type apiDoc struct {
	OpenAPI string                          `json:"openapi"`
	Paths   map[string]map[string]operation `json:"paths"`

	raw      []byte
	mu       sync.Mutex
	compiler *jsonschema.Compiler
	schemas  map[string]*jsonschema.Schema
}

type operation struct {
	OperationID string `json:"operationId"`
	Security    []any  `json:"security"`
	Parameters  []struct {
		Name string `json:"name"`
		In   string `json:"in"`
	} `json:"parameters"`
	RequestBody *struct {
		Required bool `json:"required"`
	} `json:"requestBody"`
	Responses map[string]struct {
		Content map[string]struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"content"`
	} `json:"responses"`
}

func loadDoc(base string) (*apiDoc, error) {
	resp, err := http.Get(base + "/openapi.json")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /openapi.json: %d %s", resp.StatusCode, raw)
	}
	doc := &apiDoc{raw: raw, schemas: map[string]*jsonschema.Schema{}}
	if err := json.Unmarshal(raw, doc); err != nil {
		return nil, err
	}
	parsed, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	doc.compiler = jsonschema.NewCompiler()
	doc.compiler.DefaultDraft(jsonschema.Draft2020)
	doc.compiler.AssertFormat()
	if err := doc.compiler.AddResource(docURL, parsed); err != nil {
		return nil, err
	}
	return doc, nil
}

// schema compiles the schema at a JSON pointer of the document.
func (d *apiDoc) schema(pointer string) (*jsonschema.Schema, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.schemas[pointer]; ok {
		return s, nil
	}
	s, err := d.compiler.Compile(docURL + pointer)
	if err != nil {
		return nil, err
	}
	d.schemas[pointer] = s
	return s, nil
}

// validate checks a JSON response body against the schema at pointer.
func (d *apiDoc) validate(t testing.TB, res response, pointer string) {
	t.Helper()
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: Content-Type is %q, want application/json", res, ct)
		return
	}
	d.validateJSON(t, res.String(), "body", pointer, res.Body)
}

// validateJSON checks data (what's noun: body, data) against the
// document's schema at pointer.
func (d *apiDoc) validateJSON(t testing.TB, what, noun, pointer string, data []byte) {
	t.Helper()
	s, err := d.schema(pointer)
	if err != nil {
		t.Errorf("%s: the document's schema %s does not compile: %v", what, pointer, err)
		return
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Errorf("%s: the %s is not JSON: %v", what, noun, err)
		return
	}
	if err := s.Validate(inst); err != nil {
		t.Errorf("%s: the %s does not match the document's schema %s:\n%v", what, noun, pointer, err)
	}
}

// Assertions on what a user sees.

// wantStatus stops the test when the status is not want.
func wantStatus(t testing.TB, res response, want int) {
	t.Helper()
	if res.Status != want {
		t.Fatalf("%s: status %d, want %d", res, res.Status, want)
	}
}

// wantBody checks status and body: the JSON content first (a readable diff),
// then the exact bytes, which also pins the order of keys.
func wantBody(t testing.TB, res response, status int, want string) {
	t.Helper()
	if res.Status != status {
		t.Errorf("%s: status %d, want %d", res, res.Status, status)
	}
	wantJSON, err := decodeJSON([]byte(want))
	if err != nil {
		t.Fatalf("bad expected JSON %s: %v", want, err)
	}
	if diff := cmp.Diff(wantJSON, res.JSON); diff != "" {
		t.Errorf("%s %s: body mismatch (-want +got):\n%s", res.Method, res.Path, diff)
		return
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(want)); err != nil {
		t.Fatal(err)
	}
	if got := string(res.Body); got != compact.String() {
		t.Errorf("%s %s: the body has the right content but not the right bytes (key order):\n got %s\nwant %s",
			res.Method, res.Path, got, compact.String())
	}
}

// wantDetail checks a {"detail": "..."} error.
func wantDetail(t testing.TB, res response, status int, detail string) {
	t.Helper()
	raw, _ := json.Marshal(map[string]string{"detail": detail})
	wantBody(t, res, status, string(raw))
}

// wantHeader checks one response header.
func wantHeader(t testing.TB, res response, name, want string) {
	t.Helper()
	if got := res.Header.Get(name); got != want {
		t.Errorf("%s: header %s is %q, want %q", res, name, got, want)
	}
}

// field reads a member of the decoded JSON object.
func field(t testing.TB, res response, name string) any {
	t.Helper()
	obj, ok := res.JSON.(map[string]any)
	if !ok {
		t.Fatalf("%s: the body is not a JSON object", res)
	}
	v, ok := obj[name]
	if !ok {
		t.Fatalf("%s: the body has no %q", res, name)
	}
	return v
}

func str(t testing.TB, res response, name string) string {
	t.Helper()
	s, ok := field(t, res, name).(string)
	if !ok {
		t.Fatalf("%s: %q is not a string", res, name)
	}
	return s
}

func num(t testing.TB, res response, name string) int64 {
	t.Helper()
	n, ok := field(t, res, name).(json.Number)
	if !ok {
		t.Fatalf("%s: %q is not a number", res, name)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatalf("%s: %q is not an integer", res, name)
	}
	return i
}

// wireTime is the one timestamp format on the wire: UTC, microseconds.
const wireTime = "2006-01-02T15:04:05.000000Z"

var wireTimePattern = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$`)

// timestamp parses a timestamp field, which must be in the wire format.
func timestamp(t testing.TB, res response, name string) time.Time {
	t.Helper()
	s := str(t, res, name)
	if !wireTimePattern.MatchString(s) {
		t.Errorf("%s: %s is %q, want the form %s", res, name, s, wireTime)
	}
	ts, err := time.Parse(wireTime, s)
	if err != nil {
		t.Fatalf("%s: %s: %v", res, name, err)
	}
	return ts
}

// Users.

// uniqueEmail is an address no other test uses.
func uniqueEmail() string {
	return "u-" + strings.ReplaceAll(uuid.NewString(), "-", "") + "@example.com"
}

type user struct {
	ID       int64
	Email    string
	Password string
	Name     string
	Access   string
	Refresh  string
}

// offSequenceIDs numbers the user ids of accounts a test makes without the
// id sequence (rows or events written directly), far above any the
// sequence draws: each run of such a test (-count) takes new ones.
var offSequenceIDs atomic.Int64

// offSequenceUserID is a user id no account has, nor will have from the
// sequence.
func offSequenceUserID() int64 { return 900_000_000 + offSequenceIDs.Add(1) }

// signUp makes an account through the real flow: send-code, the e-mailed
// code, verify-code, signup.
func (e *env) signUp(t testing.TB) user {
	t.Helper()
	u := user{Email: uniqueEmail(), Password: "correct horse battery", Name: "Ada Lovelace"}
	u.ID, u.Access, u.Refresh = e.signUpAs(t, u.Email, u.Password, u.Name)
	return u
}

func (e *env) signUpAs(t testing.TB, email, password, name string) (id int64, access, refresh string) {
	t.Helper()
	verified := e.verifiedToken(t, email)
	res := e.do(t, "POST", "/user/signup", map[string]string{
		"email": email, "password": password, "name": name, "email_verified_token": verified,
	}, "")
	wantStatus(t, res, http.StatusCreated)
	userObj, ok := field(t, res, "user").(map[string]any)
	if !ok {
		t.Fatalf("%s: user is not an object", res)
	}
	n, err := userObj["id"].(json.Number).Int64()
	if err != nil {
		t.Fatalf("%s: user.id: %v", res, err)
	}
	return n, str(t, res, "access_token"), str(t, res, "refresh_token")
}

// sendCode asks for a code and returns the verification token and the code.
func (e *env) sendCode(t testing.TB, email string) (token, code string) {
	t.Helper()
	res := e.do(t, "POST", "/user/email/send-code", map[string]string{"email": email}, "")
	wantStatus(t, res, http.StatusOK)
	return str(t, res, "verification_token"), e.mail.code(t, email)
}

// verifiedToken proves email: send-code, then verify-code.
func (e *env) verifiedToken(t testing.TB, email string) string {
	t.Helper()
	token, code := e.sendCode(t, email)
	res := e.do(t, "POST", "/user/email/verify-code", map[string]string{
		"email": email, "code": code, "verification_token": token,
	}, "")
	wantStatus(t, res, http.StatusOK)
	return str(t, res, "email_verified_token")
}

// clock is a time source a test moves by hand.
type clock = clocktest.Clock

func newClock(start time.Time) *clock { return clocktest.New(start) }

// loopbacks hands out loopback addresses other than 127.0.0.1.
var loopbacks struct {
	sync.Mutex
	n int
}

// from is e as a client at another address sees it: a loopback address no
// other client of the package uses (127.1.0.1 and on), for per-address
// limits. addr is that address.
func (e *env) from(t testing.TB) *env {
	t.Helper()
	loopbacks.Lock()
	n := loopbacks.n
	loopbacks.n++
	loopbacks.Unlock()
	local := net.IPv4(127, 1+byte(n/(250*250)), byte(n/250%250), byte(n%250+1))
	tr := e.srv.Client().Transport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: local}}).DialContext
	t.Cleanup(tr.CloseIdleConnections)
	other := *e
	other.client = &http.Client{Transport: tr}
	other.addr = local.String()
	return &other
}
