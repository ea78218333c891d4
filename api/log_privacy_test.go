package api_test

// What an operator sees: the service's log (JSON lines on stderr, at debug)
// and GET /metrics. Neither is reached by an erasure, so neither may hold
// a person's data or a secret, beyond what docs/privacy.md and
// docs/security.md accept: with no SMTP server configured, the e-mail with
// the sign-up code is one log line ("email", with its address and code),
// for local use only.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"lectern/knowledge"
	"lectern/llm"
	"lectern/mail"
	"lectern/mail/mailtest"
	"lectern/pgtest"
	"lectern/poll"
	"lectern/service"
)

// reviewMail is the service's mail sender: every message goes to the log,
// as with no SMTP server configured (and to box, for the test to read the
// codes), but those to refused, which go to an SMTP server that refuses
// the recipient as Postfix does, quoting the address.
type reviewMail struct {
	box     *mailbox
	log     mail.Sender
	smtp    mail.Sender
	refused string
}

func (m *reviewMail) Send(ctx context.Context, msg mail.Message) error {
	if strings.EqualFold(msg.To, m.refused) {
		return m.smtp.Send(ctx, msg)
	}
	if err := m.box.Send(ctx, msg); err != nil {
		return err
	}
	return m.log.Send(ctx, msg)
}

// holdsSecret reports whether a log line holds secret. An e-mail code is
// six digits, which any longer number or hex text may hold by chance (a
// clean-clone run once found one within a line's nanosecond time,
// "43.90961654Z"; request ids are hex): a code counts only as a word of its
// own, not within a number, after a decimal point or among letters. The
// other secrets are long random text.
func holdsSecret(line, secret string) bool {
	if strings.Trim(secret, "0123456789") == "" {
		return regexp.MustCompile(`(^|[^0-9A-Za-z.])` + secret + `([^0-9A-Za-z]|$)`).MatchString(line)
	}
	return strings.Contains(strings.ToLower(line), strings.ToLower(secret))
}

// startEmbeddings is an OpenAI-compatible embeddings endpoint: the offline
// embedder's vectors, but a 400 quoting the input (as providers do when they
// refuse one) for a batch holding fail.
func startEmbeddings(t *testing.T, fail string) string {
	t.Helper()
	offline := knowledge.NewOffline()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		for _, in := range req.Input {
			if strings.Contains(in, fail) {
				msg, _ := json.Marshal("This input cannot be embedded: '" + in + "'")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = fmt.Fprintf(w, `{"error":{"message":%s,"type":"invalid_request_error"}}`, msg)
				return
			}
		}
		vs, err := offline.Embed(r.Context(), req.Input)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		type datum struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		out := struct {
			Data []datum `json:"data"`
		}{}
		for i, v := range vs {
			out.Data = append(out.Data, datum{Index: i, Embedding: v})
		}
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// startReviewEnv is a whole service (projections, reindex worker, janitor)
// on a database of its own, logging at debug to e.logs, with models,
// embedder and mail as given.
func startReviewEnv(t *testing.T, models []llm.Model, embedder knowledge.Embedder, sender func(logger *slog.Logger, box *mailbox) mail.Sender) *env {
	t.Helper()
	e := &env{pool: pgtest.Fresh(t), mail: &mailbox{}, logs: &logLines{}, key: make([]byte, 32)}
	if _, err := rand.Read(e.key); err != nil {
		t.Fatal(err)
	}
	cat, err := llm.NewCatalogue(models...)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	svc, err := service.New(service.Config{
		Pool: e.pool, JWTKey: e.key, DataKey: dataKey, Mail: sender(logger, e.mail), AddressLimit: 100000,
		Logger: logger, Models: cat, Embedder: embedder, ConsistencyWait: pgtest.ConsistencyWait,
	})
	if err != nil {
		t.Fatalf("service.New: %v", err)
	}
	e.svc = svc
	stopBackground := svc.RunBackground(context.Background(), true)
	e.srv = httptest.NewServer(svc.Handler)
	var once sync.Once
	e.stop = func() {
		once.Do(func() {
			e.srv.Close()
			stopBackground()
		})
	}
	t.Cleanup(e.stop)
	if e.doc, err = loadDoc(e.srv.URL); err != nil {
		t.Fatalf("loading the OpenAPI document: %v", err)
	}
	return e
}

// all returns every line logged so far.
func (l *logLines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// The log and the metrics of a service driven through every kind of
// personal field, secret and failure hold none of them. Each value is
// searched for in every log line (the "email" line of the log sender may
// hold its own address and code, and nothing else), and in GET /metrics,
// whose labels must not take user input.
func TestLogsAndMetricsHoldNoPersonalData(t *testing.T) {
	t.Parallel()
	if eventStoreURL(t) != "" {
		t.Skip("runs projections on a database of its own: not with the package's shared fake EventStoreDB")
	}
	ctx := context.Background()
	marker := "MRK" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	secret := func(prefix string) string { return prefix + strings.ReplaceAll(uuid.NewString(), "-", "")[:20] }
	// secrets are what must appear nowhere, by what they are; the marker
	// stands for every personal field.
	secrets := map[string]string{"marker": marker, "data key": hex.EncodeToString(dataKey)}

	// A model provider that refuses the prompt, quoting it (shown to the
	// student, never logged), and one that is down.
	strict := newFakeProvider(t, http.StatusBadRequest, "")
	strict.message = "Your prompt 'Question " + marker + "' breaks our usage policy"
	down := newFakeProvider(t, http.StatusInternalServerError, "")
	down.message = "upstream trace for 'Question " + marker + "'"
	// An embeddings provider that refuses a document, quoting it.
	embedKey := secret("sk-embed-")
	secrets["embeddings API key"] = embedKey
	embedder := &knowledge.Remote{URL: startEmbeddings(t, "EMBEDFAIL"), Model: "e", APIKey: embedKey}
	smtpAddr := mailtest.StartRefusing(t, false)
	refused := "refused-" + strings.ToLower(marker) + "@example.com"
	e := startReviewEnv(t, []llm.Model{
		{ID: 1, Name: "echo", Provider: llm.ProviderEcho, Timeout: 5 * time.Second, Default: true},
		strict.model(2, "strict"), down.model(3, "down"),
	}, embedder, func(logger *slog.Logger, box *mailbox) mail.Sender {
		s, err := mail.NewSMTPSender(mail.SMTPConfig{URL: "smtp://" + smtpAddr, From: "Lectern <noreply@lectern.test>"})
		if err != nil {
			t.Fatal(err)
		}
		return &reviewMail{box: box, log: mail.NewLogSender(logger), smtp: s, refused: refused}
	})
	secrets["JWT key"] = hex.EncodeToString(e.key)

	// Sign up, with every secret of the flow noted.
	email := strings.ToLower(marker) + "@example.com"
	password := secret("pw-")
	secrets["password"] = password
	vtoken, code := e.sendCode(t, email)
	secrets["verification token"], secrets["e-mail code"] = vtoken, code
	res := e.do(t, "POST", "/user/email/verify-code", map[string]string{"email": email, "code": code, "verification_token": vtoken}, "")
	wantStatus(t, res, http.StatusOK)
	verified := str(t, res, "email_verified_token")
	secrets["e-mail verified token"] = verified
	res = e.do(t, "POST", "/user/signup", map[string]string{"email": email, "password": password, "name": "Ann " + marker,
		"email_verified_token": verified}, "")
	wantStatus(t, res, http.StatusCreated)
	u := user{Email: email, Password: password, Name: "Ann " + marker,
		Access: str(t, res, "access_token"), Refresh: str(t, res, "refresh_token")}
	u.ID, _ = field(t, res, "user").(map[string]any)["id"].(json.Number).Int64()
	secrets["access token"], secrets["refresh token"] = u.Access, u.Refresh

	// A duplicate sign-up, a wrong code, a wrong password, a login.
	vtoken2, code2 := e.sendCode(t, email)
	secrets["second verification token"], secrets["second e-mail code"] = vtoken2, code2
	wrongCode := "000000"
	if code2 == wrongCode {
		wrongCode = "000001"
	}
	wantStatus(t, e.do(t, "POST", "/user/email/verify-code", map[string]string{"email": email, "code": wrongCode, "verification_token": vtoken2}, ""),
		http.StatusBadRequest)
	res = e.do(t, "POST", "/user/email/verify-code", map[string]string{"email": email, "code": code2, "verification_token": vtoken2}, "")
	wantStatus(t, res, http.StatusOK)
	verified2 := str(t, res, "email_verified_token")
	secrets["second e-mail verified token"] = verified2
	wantStatus(t, e.do(t, "POST", "/user/signup", map[string]string{"email": email, "password": secret("pw-"), "name": "Dup " + marker,
		"email_verified_token": verified2}, ""), http.StatusConflict)
	wrongPassword := secret("wrong-")
	secrets["wrong password"] = wrongPassword
	wantStatus(t, e.do(t, "POST", "/user/login", map[string]string{"email": email, "password": wrongPassword}, ""), http.StatusUnauthorized)
	wantStatus(t, e.do(t, "POST", "/user/login", map[string]string{"email": "nobody-" + strings.ToLower(marker) + "@example.com", "password": wrongPassword}, ""),
		http.StatusUnauthorized)
	res = e.do(t, "POST", "/user/login", map[string]string{"email": email, "password": password}, "")
	wantStatus(t, res, http.StatusOK)
	secrets["second access token"], secrets["second refresh token"] = str(t, res, "access_token"), str(t, res, "refresh_token")
	// A refresh, and the old token reused (its family is revoked).
	res = e.do(t, "POST", "/user/token/refresh", map[string]string{"refresh_token": secrets["second refresh token"]}, "")
	wantStatus(t, res, http.StatusOK)
	secrets["rotated refresh token"] = str(t, res, "refresh_token")
	wantStatus(t, e.do(t, "POST", "/user/token/refresh", map[string]string{"refresh_token": secrets["second refresh token"]}, ""), http.StatusUnauthorized)

	// The mail server refuses a recipient: 503, and the log says why.
	res = e.doFailing(t, "POST", "/user/email/send-code", map[string]string{"email": refused}, "")
	wantStatus(t, res, http.StatusServiceUnavailable)

	// Values the validation echoes (a 422 shows them to their sender).
	wantStatus(t, e.do(t, "POST", "/user/email/send-code", map[string]string{"email": "not-an-address-" + marker}, ""), http.StatusUnprocessableEntity)
	wantStatus(t, e.do(t, "POST", "/user/login", `{"email": "`+email+`", "password": `+marker+`}`, ""), http.StatusUnprocessableEntity)
	wantStatus(t, e.do(t, "POST", "/agents", `{"name": "`+marker, u.Access), http.StatusUnprocessableEntity)

	// An agent, an example, documents (one the embedder refuses, quoting it).
	idem := secret("idem-")
	secrets["Idempotency-Key"] = idem
	agentBody := map[string]any{"name": "Tutor " + marker, "system_prompt": "Be " + marker,
		"role_description": "Role " + marker, "template_source": "Template " + marker}
	res = e.do(t, "POST", "/agents", agentBody, u.Access, "Idempotency-Key", idem)
	wantStatus(t, res, http.StatusCreated)
	agent := num(t, res, "agent_id")
	agentBody["name"] = "Other " + marker
	wantStatus(t, e.do(t, "POST", "/agents", agentBody, u.Access, "Idempotency-Key", idem), http.StatusUnprocessableEntity)
	wantStatus(t, e.do(t, "PATCH", fmt.Sprintf("/agents/%d", agent), map[string]any{"system_prompt": "Be kind " + marker}, u.Access), http.StatusOK)
	example := num(t, e.createFewShot(t, u.Access, map[string]any{"title": "Ex " + marker, "input_text": "In " + marker,
		"output_text": "Out " + marker, "meta": map[string]any{"note": marker}}), "example_id")
	content := "The cell divides. " + marker
	sum := sha256.Sum256([]byte(content))
	secrets["document hash"] = hex.EncodeToString(sum[:])
	doc := num(t, e.uploadDocument(t, u.Access, "Notes "+marker, content), "knowledge_id")
	wantStatus(t, e.uploadFile(t, u.Access, "notes-"+marker+".txt", "text/plain", []byte("Filed text. "+marker), "File "+marker), http.StatusCreated)
	wantStatus(t, e.uploadFile(t, u.Access, "notes-"+marker+".exe", "application/x-msdownload", []byte("MZ "+marker), ""), http.StatusUnprocessableEntity)
	refusedDoc := num(t, e.uploadDocument(t, u.Access, "Refused "+marker, "EMBEDFAIL The cell divides. "+marker), "knowledge_id")
	poll.Must(t, 30*time.Second, "the refused document's reindex job failed", func() bool {
		var failed bool
		err := e.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM knowledge_reindex_jobs WHERE knowledge_id = $1 AND status = 'failed')`, refusedDoc).Scan(&failed)
		return err == nil && failed
	})
	wantStatus(t, e.do(t, "POST", documentPath(doc)+"/search", map[string]any{"query": "divides " + marker}, u.Access), http.StatusOK)
	wantStatus(t, e.doFailing(t, "POST", documentPath(doc)+"/search", map[string]any{"query": "EMBEDFAIL " + marker}, u.Access), http.StatusBadGateway)

	// A school, a class, a partner with a phone (and one without an
	// account), a promotion request.
	s := openSchool(t, e)
	created := e.createClass(t, s, map[string]any{"name": "Class of " + uniqueEmail()})
	class := num(t, created, "id")
	invite, _ := inviteCodes(t, created)["student"]["code"].(string)
	secrets["invite code"] = invite
	wantStatus(t, e.join(t, u, "Z"+strings.ToUpper(marker[3:10])), http.StatusNotFound)
	wantStatus(t, e.join(t, u, invite), http.StatusCreated)
	wantStatus(t, e.do(t, "POST", fmt.Sprintf("/partner/partners?org_id=%d", s.org), map[string]any{
		"org_id": s.org, "full_name": "Ann " + marker, "email": email, "phone": "+44 " + marker, "user_id": u.ID,
	}, s.admin.Access), http.StatusCreated)
	res = e.do(t, "POST", fmt.Sprintf("/partner/partners?org_id=%d", s.org), map[string]any{
		"org_id": s.org, "full_name": "Bea " + marker, "email": "bea-" + strings.ToLower(marker) + "@example.com", "phone": "+33 " + marker,
	}, s.admin.Access)
	wantStatus(t, res, http.StatusCreated)
	wantStatus(t, e.do(t, "POST", fmt.Sprintf("/admin/partners/%d/erase", num(t, res, "id")), nil, s.admin.Access), http.StatusNoContent)
	wantStatus(t, e.do(t, "POST", "/user/partner-promotion-requests", map[string]any{"name": "Ann " + marker,
		"email": email, "org_name": "School " + marker, "edu_category": "Cat " + marker}, u.Access), http.StatusCreated)

	// Practice turns: answered, half failed, all failed (the providers
	// quote the prompt), streamed, continued, and a model name typed wrong.
	_, turn := e.startSession(t, u.Access, class, map[string]any{"prompt_text": "Question " + marker,
		"model_names": []string{"echo", "strict"}, "agent_id": agent, "few_shot_example_ids": []int64{example},
		"knowledge_ids": []int64{doc}, "style_params": map[string]any{"persona": "Start " + marker}})
	res = e.doFailing(t, "POST", runPath(class), map[string]any{"prompt_text": "Question " + marker, "model_names": []string{"strict", "down"}}, u.Access)
	wantStatus(t, res, http.StatusBadGateway)
	if !strings.Contains(string(res.Body), marker) {
		t.Errorf("%s: the provider's refusal is not shown: the test proves nothing of its log", res)
	}
	wantStatus(t, e.do(t, "POST", runPath(class), map[string]any{"prompt_text": "Question " + marker, "model_names": []string{"model-" + marker}}, u.Access),
		http.StatusUnprocessableEntity)
	if st := e.stream(t, runPath(class), map[string]any{"prompt_text": "Streamed " + marker, "model_names": []string{"echo", "strict"}}, u.Access, nil); st.Status != http.StatusCreated {
		t.Errorf("the streamed turn answered %d", st.Status)
	}
	wantStatus(t, e.do(t, "POST", sessionPath(turn.SessionID)+"/chat", map[string]any{"prompt_text": "Again " + marker}, u.Access), http.StatusOK)
	wantStatus(t, e.doFailing(t, "POST", sessionPath(turn.SessionID)+"/chat", map[string]any{"prompt_text": "Again " + marker,
		"model_names": []string{"strict"}}, u.Access), http.StatusBadGateway)
	wantStatus(t, e.do(t, "PATCH", sessionPath(turn.SessionID)+"/settings", map[string]any{"style_preset": "creative",
		"style_params": map[string]any{"persona": "Persona " + marker}}, u.Access), http.StatusOK)
	wantStatus(t, e.do(t, "GET", sessionsPath+"?page=1&q="+marker, nil, u.Access), http.StatusOK)
	wantStatus(t, e.do(t, "GET", "/user/me/export", nil, u.Access), http.StatusOK)

	// A new password, a logout, and the erasure.
	newPassword := secret("pw2-")
	secrets["new password"] = newPassword
	wantStatus(t, e.do(t, "POST", "/user/me/password", map[string]string{"current_password": wrongPassword, "new_password": newPassword}, u.Access),
		http.StatusForbidden)
	wantStatus(t, e.do(t, "POST", "/user/me/password", map[string]string{"current_password": password, "new_password": newPassword}, u.Access),
		http.StatusNoContent)
	wantStatus(t, e.do(t, "POST", "/user/logout", map[string]string{"refresh_token": secrets["rotated refresh token"]}, ""), http.StatusNoContent)
	res = e.do(t, "POST", "/user/login", map[string]string{"email": email, "password": newPassword}, "")
	wantStatus(t, res, http.StatusOK)
	last := str(t, res, "access_token")
	secrets["last access token"] = last
	wantStatus(t, e.do(t, "DELETE", "/user/me", map[string]any{"password": newPassword}, last), http.StatusNoContent)
	// Nor may the log of events, in clear, or the jobs' rows: the refused
	// document's reindex job failed with an answer that quoted it.
	var inEvents, inJobs int
	if err := e.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM events WHERE payload::text ILIKE '%' || $1 || '%'),
		(SELECT count(*) FROM knowledge_reindex_jobs WHERE error ILIKE '%' || $1 || '%')`, marker).Scan(&inEvents, &inJobs); err != nil {
		t.Fatal(err)
	}
	if inEvents+inJobs > 0 {
		t.Errorf("after the erasure the marker is in %d events and %d reindex jobs, in clear", inEvents, inJobs)
	}

	// A path no route matches, and a method the API does not route: their
	// metrics' labels are "unmatched" and "OTHER", never what was sent.
	noRoute := secret("no-route-")
	wantStatus(t, e.send(t, "GET", "/"+noRoute+"/1", nil, ""), http.StatusNotFound)
	wantStatus(t, e.send(t, noRoute[:8], "/agents", nil, ""), http.StatusMethodNotAllowed)

	// What an operator sees.
	e.stop() // its background work's lines too: all it logged
	lines := e.logs.all()
	var leaks []string
	mailLines := 0
	for _, line := range lines {
		checked := line
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Errorf("a log line is not JSON: %s", line)
			continue
		}
		if entry["msg"] == "email" {
			// The log sender's line: its address and its code, as the
			// docs accept for a service without an SMTP server.
			to, _ := entry["to"].(string)
			body, _ := entry["body"].(string)
			if !regexp.MustCompile(`^Your Lectern verification code is \d{6}\. It expires in \d+ minutes\.$`).MatchString(body) {
				t.Errorf("the e-mail's log line holds more than its code: %s", line)
			}
			delete(entry, "to")
			delete(entry, "body")
			raw, _ := json.Marshal(entry)
			checked = string(raw)
			if strings.EqualFold(to, email) {
				mailLines++
			}
		}
		for what, v := range secrets {
			if v != "" && holdsSecret(checked, v) {
				leaks = append(leaks, what+": "+line)
			}
		}
	}
	if mailLines != 2 {
		t.Errorf("%d e-mail lines to the user's address, want 2 (the log sender logs its codes): the test proves nothing of them", mailLines)
	}
	for _, want := range []string{`"msg":"every model of a practice turn failed"`, `"msg":"reindex job failed"`,
		`"msg":"indexing an uploaded document failed; a reindex job takes it over"`, `"msg":"refresh token reused; token family revoked"`} {
		if !e.logs.contains(want) {
			t.Errorf("no log line %s: the test does not reach what it checks", want)
		}
	}
	if !e.logs.contains(`"status":503`) {
		t.Errorf("no log line of the refused e-mail's 503")
	}
	sort.Strings(leaks)
	for _, l := range leaks {
		t.Errorf("the log holds the %s", l)
	}

	// GET /metrics: no value, and no label that takes user input.
	rec := httptest.NewRecorder()
	e.svc.Metrics.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	metricsText := rec.Body.String()
	if !strings.Contains(metricsText, "lectern_http_requests_total") || !strings.Contains(metricsText, `lectern_model_calls_total{model="strict"`) {
		t.Fatalf("GET /metrics lacks the request and model metrics:\n%s", metricsText)
	}
	for what, v := range secrets {
		if strings.Contains(strings.ToLower(metricsText), strings.ToLower(v)) {
			t.Errorf("GET /metrics holds the %s", what)
		}
	}
	if strings.Contains(metricsText, noRoute) || strings.Contains(metricsText, noRoute[:8]) {
		t.Errorf("GET /metrics holds a path or method a client sent")
	}
	if !strings.Contains(metricsText, `method="OTHER"`) || !strings.Contains(metricsText, `route="unmatched"`) {
		t.Errorf("GET /metrics counts no request by method OTHER or route unmatched: the test proves nothing of them")
	}
	patterns := map[string]bool{"unmatched": true}
	_ = chi.Walk(e.svc.Handler.Router(), func(_ string, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		patterns[route] = true
		return nil
	})
	models := map[string]bool{"echo": true, "strict": true, "down": true}
	label := regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)
	for _, line := range strings.Split(metricsText, "\n") {
		if !strings.HasPrefix(line, "lectern_") {
			continue
		}
		for _, m := range label.FindAllStringSubmatch(line, -1) {
			switch name, value := m[1], m[2]; name {
			case "route":
				if !patterns[value] {
					t.Errorf("a route label is not a route pattern: %s", line)
				}
			case "model":
				if !models[value] {
					t.Errorf("a model label is not a model of the catalogue: %s", line)
				}
			}
		}
	}
}
