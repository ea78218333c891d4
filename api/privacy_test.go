package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"lectern/aggregates"
	"lectern/events"
	"lectern/eventstore"
	"lectern/history"
	"lectern/llm"
	"lectern/poll"
	"lectern/projections"
)

// personalUser is a user whose every kind of personal field holds marker.
type personalUser struct {
	user
	marker  string
	partner int64
	agent   int64
	session int64
	doc     int64
}

// fillPersonalData signs up a user whose name and e-mail hold a fresh
// marker, and fills with it every kind of personal field: an agent, a
// few-shot example, a practice session (prompt, answers, style parameters,
// the agent's system prompt in its settings), a knowledge document (title and text), a
// promotion request, and a partner record (name, phone) made by an admin.
func fillPersonalData(t *testing.T, e *env) personalUser {
	t.Helper()
	marker := "MRK" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	u := user{Email: strings.ToLower(marker) + "@example.com", Password: "correct horse battery", Name: "Ann " + marker}
	u.ID, u.Access, u.Refresh = e.signUpAs(t, u.Email, u.Password, u.Name)
	p := personalUser{user: u, marker: marker}

	s := openSchool(t, e)
	class := num(t, e.createClass(t, s, map[string]any{"name": "Privacy " + uniqueEmail()}), "id")
	wantStatus(t, e.enroll(t, s, class, u.ID), http.StatusCreated)
	res := e.do(t, "POST", fmt.Sprintf("/partner/partners?org_id=%d", s.org), map[string]any{
		"org_id": s.org, "full_name": "Ann " + marker, "email": u.Email, "phone": "+44 " + marker, "user_id": u.ID,
	}, s.admin.Access)
	wantStatus(t, res, http.StatusCreated)
	p.partner = num(t, res, "id")

	p.agent = num(t, e.createAgent(t, u.Access, map[string]any{"name": "Tutor " + marker, "system_prompt": "Be " + marker,
		"role_description": "Role " + marker, "template_source": "Template " + marker}), "agent_id")
	example := num(t, e.createFewShot(t, u.Access, map[string]any{"title": "Ex " + marker, "input_text": "In " + marker,
		"output_text": "Out " + marker, "meta": map[string]any{"note": marker}}), "example_id")
	doc := e.uploadDocument(t, u.Access, "Notes "+marker, "The cell divides. "+marker)
	p.doc = num(t, doc, "knowledge_id")
	wantStatus(t, e.do(t, "PATCH", fmt.Sprintf("/user/document/%d/settings/search", p.doc),
		map[string]any{"reranker_model": "Rerank " + marker}, u.Access), http.StatusOK)
	_, turn := e.startSession(t, u.Access, class, map[string]any{"prompt_text": "Question " + marker,
		"model_names": []string{"echo", "echo-reverse"}, "agent_id": p.agent, "few_shot_example_ids": []int64{example},
		"knowledge_ids": []int64{p.doc}, "style_params": map[string]any{"persona": "Start " + marker}})
	p.session = turn.SessionID
	wantStatus(t, e.do(t, "PATCH", sessionPath(p.session)+"/settings", map[string]any{"style_preset": "creative",
		"style_params": map[string]any{"persona": "Persona " + marker}}, u.Access), http.StatusOK)
	wantStatus(t, e.do(t, "POST", "/user/partner-promotion-requests", map[string]any{"name": "Ann " + marker,
		"email": u.Email, "org_name": "School " + marker, "edu_category": "Cat " + marker}, u.Access), http.StatusCreated)
	return p
}

// markerHits counts, in every table of the database, the rows that hold
// marker anywhere (each row cast to text), in any case (the e-mail address
// is lower-cased), by table.
func markerHits(t *testing.T, e *env, marker string) map[string]int {
	t.Helper()
	ctx := context.Background()
	rows, err := e.pool.Query(ctx, `SELECT quote_ident(table_name) FROM information_schema.tables
		WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	hits := map[string]int{}
	for _, table := range tables {
		var n int
		// convert_from would fail on non-UTF-8 bytes; a text cast escapes bytea as hex, so also look for the marker's hex.
		if err := e.pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s x
			WHERE strpos(lower(x::text), $1) > 0 OR strpos(x::text, $2) > 0 OR strpos(x::text, $3) > 0`, table),
			strings.ToLower(marker), fmt.Sprintf("%x", marker), fmt.Sprintf("%x", strings.ToLower(marker))).Scan(&n); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		if n > 0 {
			hits[table] = n
		}
	}
	return hits
}

// eventHits counts the events of the log whose data or metadata hold
// marker, in any case: as stored, and as every reader reads them (opened
// with the keys).
func eventHits(t *testing.T, e *env, marker string) (stored, opened int) {
	t.Helper()
	ctx := context.Background()
	for _, s := range []struct {
		store eventstore.Store
		n     *int
	}{{e.rawEvents(t), &stored}, {e.events(t), &opened}} {
		var after eventstore.Position
		for {
			evs, err := s.store.ReadAll(ctx, after, 1000)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				if containsFold(string(ev.Data), marker) || containsFold(fmt.Sprint(ev.Metadata), marker) {
					*s.n++
				}
			}
			if len(evs) < 1000 {
				break
			}
			after = evs[len(evs)-1].Position
		}
	}
	return stored, opened
}

// exportHits counts marker in every export format of the whole log.
func exportHits(t *testing.T, e *env, marker string) int {
	t.Helper()
	store := e.events(t)
	n := 0
	for _, export := range []func(context.Context, eventstore.Store, *bytes.Buffer) error{
		func(ctx context.Context, s eventstore.Store, w *bytes.Buffer) error {
			_, err := history.Export(ctx, s, w, history.Filter{})
			return err
		},
		func(ctx context.Context, s eventstore.Store, w *bytes.Buffer) error {
			_, err := history.ExportCloudEvents(ctx, s, w, history.Filter{})
			return err
		},
	} {
		var out bytes.Buffer
		if err := export(context.Background(), store, &out); err != nil {
			t.Fatal(err)
		}
		n += countFold(out.String(), marker)
	}
	return n
}

// containsFold reports whether s holds marker in any case.
func containsFold(s, marker string) bool { return countFold(s, marker) > 0 }

// countFold counts marker in s in any case (markers are ASCII).
func countFold(s, marker string) int {
	return strings.Count(strings.ToLower(s), strings.ToLower(marker))
}

// adminEventHits counts marker in the whole of GET /admin/events.
func adminEventHits(t *testing.T, e *env, admin user, marker string) int {
	t.Helper()
	n, after := 0, ""
	for {
		path := "/admin/events?limit=1000"
		if after != "" {
			path += "&after=" + after
		}
		res := e.do(t, "GET", path, nil, admin.Access)
		wantStatus(t, res, http.StatusOK)
		n += countFold(string(res.Body), marker)
		next, _ := field(t, res, "next").(string)
		if next == "" || next == after {
			return n
		}
		after = next
	}
}

// Erasure, shown: every kind of personal field of one user holds a marker;
// the user exports it, then erases the account; afterwards the marker is in
// no table of the database (read models, the PostgreSQL event log, the
// downstream topic, operational tables), no event as stored or as read, no
// export format and no admin read, on either store; another user's data is
// untouched; the address may sign up again.
func TestErasureLeavesNothing(t *testing.T) {
	e := sharedEnv(t)
	ann := fillPersonalData(t, e)
	bob := fillPersonalData(t, e)
	admin := asAdmin(t, e)

	// The export holds everything of Ann's, and nothing of Bob's.
	res := e.do(t, "GET", "/user/me/export", nil, ann.Access)
	wantStatus(t, res, http.StatusOK)
	for _, want := range []string{"Ann " + ann.marker, "Be " + ann.marker, "Out " + ann.marker, "Question " + ann.marker, "Persona " + ann.marker,
		"The cell divides. " + ann.marker, "School " + ann.marker, "+44 " + ann.marker} {
		if !strings.Contains(string(res.Body), want) {
			t.Errorf("the export lacks %q:\n%s", want, res.Body)
		}
	}
	if strings.Contains(string(res.Body), bob.marker) {
		t.Errorf("Ann's export holds Bob's data")
	}
	if hits := markerHits(t, e, ann.marker); len(hits) == 0 {
		t.Fatal("the marker is in no table before the erasure: the search finds nothing")
	}
	if stored, opened := eventHits(t, e, ann.marker); stored != 0 || opened == 0 {
		t.Fatalf("before the erasure, %d events hold the marker as stored (want 0: sealed) and %d as read (want some)", stored, opened)
	}
	// The document's address, its text's SHA-256, would confirm a guess at
	// the text: it is sealed too.
	sum := sha256.Sum256([]byte("The cell divides. " + ann.marker))
	textHash := hex.EncodeToString(sum[:])
	if stored, opened := eventHits(t, e, textHash); stored != 0 || opened == 0 {
		t.Fatalf("before the erasure, %d events hold the text's hash as stored (want 0: sealed) and %d as read (want some)", stored, opened)
	}

	// The password confirms the erasure.
	wantDetail(t, e.do(t, "DELETE", "/user/me", map[string]any{"password": "wrong password"}, ann.Access),
		http.StatusForbidden, "The password is not correct")
	wantStatus(t, e.do(t, "DELETE", "/user/me", map[string]any{"password": ann.Password}, ann.Access), http.StatusNoContent)

	wantStatus(t, e.do(t, "GET", "/user/me", nil, ann.Access), http.StatusUnauthorized)
	if hits := markerHits(t, e, ann.marker); len(hits) != 0 {
		t.Errorf("after the erasure the marker is still in %v", hits)
	}
	if stored, opened := eventHits(t, e, ann.marker); stored != 0 || opened != 0 {
		t.Errorf("after the erasure %d events hold the marker as stored, %d as read", stored, opened)
	}
	if hits := markerHits(t, e, textHash); len(hits) != 0 {
		t.Errorf("after the erasure the text's hash is still in %v", hits)
	}
	if stored, opened := eventHits(t, e, textHash); stored != 0 || opened != 0 {
		t.Errorf("after the erasure %d events hold the text's hash as stored, %d as read", stored, opened)
	}
	if n := exportHits(t, e, textHash) + adminEventHits(t, e, admin, textHash); n != 0 {
		t.Errorf("the exports and GET /admin/events hold the text's hash %d times", n)
	}
	if n := exportHits(t, e, ann.marker); n != 0 {
		t.Errorf("the exports hold the marker %d times", n)
	}
	if n := adminEventHits(t, e, admin, ann.marker); n != 0 {
		t.Errorf("GET /admin/events holds the marker %d times", n)
	}

	// Bob's data is whole.
	if stored, opened := eventHits(t, e, bob.marker); stored != 0 || opened == 0 {
		t.Errorf("Bob's events: %d hold his marker as stored, %d as read: want 0 and some", stored, opened)
	}
	res = e.do(t, "GET", "/user/me/export", nil, bob.Access)
	wantStatus(t, res, http.StatusOK)
	if !strings.Contains(string(res.Body), "Be "+bob.marker) || !strings.Contains(string(res.Body), "The cell divides. "+bob.marker) {
		t.Errorf("Bob's export lost his data:\n%s", res.Body)
	}

	// The erased account cannot log in. (A failed login is rate-limited like
	// any other: its record holds the address typed for the limit's window.)
	wantStatus(t, e.do(t, "POST", "/user/login", map[string]any{"email": ann.Email, "password": ann.Password}, ""), http.StatusUnauthorized)

	// The address is free again: a new account.
	id, _, _ := e.signUpAs(t, ann.Email, "another good password", "Ann again")
	if id == ann.ID {
		t.Errorf("the address signed up as the erased user %d", id)
	}
}

// The export holds the earlier versions of what the caller wrote, which
// the log keeps (sealed under their key) until their erasure: each event of
// their own streams, opened, in "history". Another user's are not in it.
func TestExportHoldsEarlierVersions(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u, other := e.signUp(t), e.signUp(t)
	marker := "MRK" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]

	agent := num(t, e.createAgent(t, u.Access, map[string]any{"name": "Tutor", "system_prompt": "Old prompt " + marker}), "agent_id")
	wantStatus(t, e.do(t, "PATCH", fmt.Sprintf("/agents/%d", agent), map[string]any{"system_prompt": "New prompt"}, u.Access), http.StatusOK)
	example := num(t, e.createFewShot(t, u.Access, map[string]any{"input_text": "Old input " + marker, "output_text": "Out"}), "example_id")
	wantStatus(t, e.do(t, "PATCH", fmt.Sprintf("/user/practice/few-shot-examples/%d", example),
		map[string]any{"input_text": "New input"}, u.Access), http.StatusOK)
	e.createAgent(t, other.Access, map[string]any{"name": "Tutor", "system_prompt": "Other's prompt " + marker})

	res := e.do(t, "GET", "/user/me/export", nil, u.Access)
	wantStatus(t, res, http.StatusOK)
	var export struct {
		History []struct {
			Stream  string          `json:"stream"`
			Version int64           `json:"version"`
			Type    string          `json:"type"`
			Data    json.RawMessage `json:"data"`
		} `json:"history"`
	}
	if err := json.Unmarshal(res.Body, &export); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, h := range export.History {
		got[fmt.Sprintf("%s/%d %s", h.Stream, h.Version, h.Type)] = string(h.Data)
	}
	for key, want := range map[string]string{
		fmt.Sprintf("user-%d/1 user.signed_up", u.ID):        u.Email,
		fmt.Sprintf("agent-%d/1 agent.created", agent):       "Old prompt " + marker,
		fmt.Sprintf("agent-%d/2 agent.updated", agent):       "New prompt",
		fmt.Sprintf("fewshot-%d/1 fewshot.created", example): "Old input " + marker,
		fmt.Sprintf("fewshot-%d/2 fewshot.updated", example): "New input",
	} {
		if data, ok := got[key]; !ok || !strings.Contains(data, want) {
			t.Errorf("the export's history: %s holds %q, want it with %q", key, data, want)
		}
	}
	if n := strings.Count(string(res.Body), "Other's prompt"); n != 0 {
		t.Errorf("the export holds another user's agent %d times", n)
	}
}

// A failed model's error holds the provider's message, which may quote the
// prompt: it is sealed in the log, shown to its user, and gone on erasure.
func TestErasureTakesAProvidersErrorMessage(t *testing.T) {
	t.Parallel()
	marker := "MRK" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	strict := newFakeProvider(t, http.StatusBadRequest, "")
	strict.message = "Your prompt 'Question " + marker + "' breaks our usage policy"
	e := newModelEnv(t, strict.model(1, "strict"), llm.Model{ID: 2, Name: "echo", Provider: llm.ProviderEcho, Timeout: time.Second, Default: true})
	c := e.newClassroom(t, nil)
	u := c.student
	_, turn := e.startSession(t, u.Access, c.class, map[string]any{"prompt_text": "Question", "model_names": []string{"strict", "echo"}})
	detail := e.do(t, "GET", sessionPath(turn.SessionID), nil, u.Access)
	wantStatus(t, detail, http.StatusOK)
	if !strings.Contains(string(detail.Body), marker) {
		t.Fatalf("the provider's message is not in the session: the test proves nothing:\n%s", detail.Body)
	}
	if stored, opened := eventHits(t, e, marker); stored != 0 || opened != 1 {
		t.Errorf("before the erasure, %d events hold the provider's message as stored (want 0: sealed) and %d as read (want 1)", stored, opened)
	}

	wantStatus(t, e.do(t, "DELETE", "/user/me", map[string]any{"password": u.Password}, u.Access), http.StatusNoContent)
	if hits := markerHits(t, e, marker); len(hits) != 0 {
		t.Errorf("after the erasure the provider's message is still in %v", hits)
	}
	if stored, opened := eventHits(t, e, marker); stored != 0 || opened != 0 {
		t.Errorf("after the erasure %d events hold the provider's message as stored, %d as read", stored, opened)
	}
}

// An admin erases a user on request; a missing user is 404, and only admins
// may.
func TestAdminErasesAUser(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	admin := asAdmin(t, e)
	u := e.signUp(t)
	other := e.signUp(t)
	wantStatus(t, e.do(t, "POST", fmt.Sprintf("/admin/users/%d/erase", u.ID), nil, other.Access), http.StatusForbidden)
	wantStatus(t, e.do(t, "POST", fmt.Sprintf("/admin/users/%d/erase", u.ID), nil, ""), http.StatusUnauthorized)
	wantStatus(t, e.do(t, "POST", "/admin/users/999999999/erase", nil, admin.Access), http.StatusNotFound)
	wantStatus(t, e.do(t, "POST", fmt.Sprintf("/admin/users/%d/erase", u.ID), nil, admin.Access), http.StatusNoContent)
	wantStatus(t, e.do(t, "GET", "/user/me", nil, u.Access), http.StatusUnauthorized)
	// Erasing again changes nothing and succeeds.
	wantStatus(t, e.do(t, "POST", fmt.Sprintf("/admin/users/%d/erase", u.ID), nil, admin.Access), http.StatusNoContent)
	evs := e.streamEvents(t, fmt.Sprintf("user-%d", u.ID))
	if types := eventTypes(evs); types[len(types)-1] != "user.erased" || strings.Count(strings.Join(types, ","), "user.erased") != 1 {
		t.Errorf("the user's stream: %v, want one user.erased at its end", types)
	}
	if p := payload(t, evs[len(evs)-1]); p["actor"] != jsonNum(admin.ID) {
		t.Errorf("user.erased %v: want the admin as actor", p)
	}
	wantStatus(t, e.do(t, "GET", "/user/me", nil, other.Access), http.StatusOK)

	// An admin erases their own account as anyone does, with the password
	// (DELETE /user/me): a token alone does not.
	wantDetail(t, e.do(t, "POST", fmt.Sprintf("/admin/users/%d/erase", admin.ID), nil, admin.Access), http.StatusForbidden,
		"Erase your own account with DELETE /user/me, which your password confirms")
	wantStatus(t, e.do(t, "GET", "/user/me", nil, admin.Access), http.StatusOK)
}

// A user from before sealing, whose sign-up was appended in clear and who
// has no key row, is erased as any other (an upgraded school's students):
// 204, user.erased recorded, a tombstone for the key, so that a later
// `lectern events seal` seals their values under a key already gone, and
// the read model forgets them. (The clear event itself keeps its values
// until then: docs/privacy.md.)
func TestAdminErasesAUserFromBeforeSealing(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	ctx := context.Background()
	admin := asAdmin(t, e)
	id := offSequenceUserID()
	email := fmt.Sprintf("legacy-%d-%s@example.com", id, uuid.NewString()[:8])
	signedUp := events.UserSignedUp{UserID: id, Email: email, Name: "Legacy Learner", Roles: []string{"user"}}
	data, err := json.Marshal(signedUp)
	if err != nil {
		t.Fatal(err)
	}
	stream := fmt.Sprintf("user-%d", id)
	if _, err := e.rawEvents(t).Append(ctx, stream, eventstore.NoStream, []eventstore.EventData{{ID: uuid.New(),
		Type: signedUp.EventType(), SchemaVersion: signedUp.SchemaVersion(), Data: data, Metadata: eventstore.Metadata{UserID: id}}}); err != nil {
		t.Fatal(err)
	}
	keyRow := func() (exists, tombstone bool) {
		err := e.pool.QueryRow(ctx, `SELECT wrapped IS NULL FROM subject_keys WHERE subject = $1`, stream).Scan(&tombstone)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return true, tombstone
	}
	if exists, _ := keyRow(); exists {
		t.Fatal("the user from before sealing has a key row: the test makes none")
	}
	usersWithEmail := func() int {
		var n int
		if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM users WHERE email = $1`, email).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	poll.Must(t, 20*time.Second, "the user from before sealing in the read model", func() bool { return usersWithEmail() == 1 })

	wantStatus(t, e.do(t, "POST", fmt.Sprintf("/admin/users/%d/erase", id), nil, admin.Access), http.StatusNoContent)
	if exists, tombstone := keyRow(); !exists || !tombstone {
		t.Errorf("after the erasure the key row exists %v, is a tombstone %v: want a tombstone", exists, tombstone)
	}
	evs := e.streamEvents(t, stream)
	if types := eventTypes(evs); len(types) != 2 || types[1] != "user.erased" {
		t.Errorf("the user's stream: %v, want the sign-up then user.erased", types)
	}
	poll.Must(t, 20*time.Second, "the read model without the erased user's address", func() bool { return usersWithEmail() == 0 })
	// Erasing again changes nothing and succeeds.
	wantStatus(t, e.do(t, "POST", fmt.Sprintf("/admin/users/%d/erase", id), nil, admin.Access), http.StatusNoContent)
	if n := len(e.streamEvents(t, stream)); n != 2 {
		t.Errorf("a second erasure: %d events in the user's stream, want 2", n)
	}
}

// Erasing oneself needs a password; an export needs a token.
func TestPrivacyValidation(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	res := e.do(t, "DELETE", "/user/me", map[string]any{}, u.Access)
	wantStatus(t, res, http.StatusUnprocessableEntity)
	if !strings.Contains(string(res.Body), `"loc":["body","password"]`) {
		t.Errorf("%s: want password missing", res)
	}
	wantStatus(t, e.do(t, "DELETE", "/user/me", map[string]any{"password": "x"}, ""), http.StatusUnauthorized)
	wantStatus(t, e.do(t, "GET", "/user/me/export", nil, ""), http.StatusUnauthorized)
	wantStatus(t, e.do(t, "POST", "/admin/users/0/erase", nil, u.Access), http.StatusUnprocessableEntity)
}

// The export holds what no read model keeps: the exact messages each turn
// sent its models (as the session's stream holds them), and the rate-limit
// records of the caller's attempts (logins by client address, failed ones,
// failed class joins). The erasure forgets those records.
func TestExportHoldsSentMessagesAndAttempts(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	before := time.Now().Add(-time.Second) // the server's clock may be a little behind
	wantStatus(t, e.do(t, "POST", "/user/login", map[string]any{"email": u.Email, "password": "wrong password"}, ""), http.StatusUnauthorized)
	wantStatus(t, e.do(t, "POST", "/user/login", map[string]any{"email": u.Email, "password": u.Password}, ""), http.StatusOK)
	wantDetail(t, e.join(t, u, "ZZZZZZZZ"), http.StatusNotFound, "Invite code not found")
	s := openSchool(t, e)
	class := num(t, e.createClass(t, s, map[string]any{"name": "Export " + uniqueEmail()}), "id")
	wantStatus(t, e.enroll(t, s, class, u.ID), http.StatusCreated)
	_, turn := e.startSession(t, u.Access, class, map[string]any{"prompt_text": "First question"})
	wantStatus(t, e.do(t, "POST", sessionPath(turn.SessionID)+"/chat", map[string]any{"prompt_text": "Second question"}, u.Access), http.StatusOK)
	e.uploadDocument(t, u.Access, "Notes", "Cells divide.")

	res := e.do(t, "GET", "/user/me/export", nil, u.Access)
	wantStatus(t, res, http.StatusOK)
	var export struct {
		RateLimitRecords []struct {
			Kind          string   `json:"kind"`
			ClientAddress *string  `json:"client_address"`
			Times         []string `json:"times"`
		} `json:"rate_limit_records"`
		RateLimitBuckets []struct {
			Kind   string    `json:"kind"`
			FullAt time.Time `json:"full_at"`
		} `json:"rate_limit_buckets"`
	}
	if err := json.Unmarshal(res.Body, &export); err != nil {
		t.Fatal(err)
	}
	// Each turn's messages as sent: the second turn's include the first
	// turn (its prompt and the echo model's answer), which its event does
	// not repeat.
	user := func(s string) map[string]any { return map[string]any{"role": "user", "content": s} }
	assistant := func(s string) map[string]any { return map[string]any{"role": "assistant", "content": s} }
	wantSent := []any{
		map[string]any{"session_id": jsonNum(turn.SessionID), "turn": jsonNum(1), "messages": []any{user("First question")}},
		map[string]any{"session_id": jsonNum(turn.SessionID), "turn": jsonNum(2),
			"messages": []any{user("First question"), assistant("First question"), user("Second question")}},
	}
	if diff := cmp.Diff(any(wantSent), field(t, res, "sent_messages")); diff != "" {
		t.Errorf("the export's sent_messages (-want +got):\n%s", diff)
	}
	kinds := map[string]int{}
	for _, r := range export.RateLimitRecords {
		client := "-"
		if r.ClientAddress != nil {
			client = *r.ClientAddress
		}
		kinds[r.Kind+" "+client] += len(r.Times)
	}
	// A failed attempt's address is not shown: it is whoever typed the
	// caller's e-mail address (the per-address record and the account's
	// each hold the failed login).
	want := map[string]int{"login-ok 127.0.0.1": 1, "login-fail 127.0.0.1": 0, "login-fail -": 2, "join-fail -": 1}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("the export's rate_limit_records hold %d times of %q, want %d: %v", kinds[k], k, n, export.RateLimitRecords)
		}
	}

	// The allowances the user spent: joins and turns, each whole again
	// later than the attempts that spent them.
	var spent []string
	for _, b := range export.RateLimitBuckets {
		spent = append(spent, b.Kind)
		if !b.FullAt.After(before) {
			t.Errorf("the export's %s bucket is full at %s, before the user spent it (%s)", b.Kind, b.FullAt, before)
		}
	}
	if diff := cmp.Diff([]string{"join-user", "turns", "uploads", "writes"}, spent); diff != "" {
		t.Errorf("the export's rate_limit_buckets (-want +got):\n%s", diff)
	}

	// The buckets keyed by the user's id: failed joins, joins, turns,
	// uploads, the write budget.
	buckets := func() int {
		t.Helper()
		var n int
		if err := e.pool.QueryRow(context.Background(), `SELECT
			(SELECT count(*) FROM rate_windows WHERE bucket = 'join-fail:' || $1) +
			(SELECT count(*) FROM rate_buckets WHERE bucket IN ('join-user:' || $1, 'turns:' || $1, 'uploads:' || $1, 'writes:' || $1))`,
			fmt.Sprint(u.ID)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := buckets(); n != 5 {
		t.Fatalf("%d of the user's own rate-limit buckets before the erasure, want 5: the check below proves nothing", n)
	}
	wantStatus(t, e.do(t, "DELETE", "/user/me", map[string]any{"password": u.Password}, u.Access), http.StatusNoContent)
	if n := buckets(); n != 0 {
		t.Errorf("the erasure left %d of the user's rate-limit buckets (failed joins, joins, turns, uploads, writes)", n)
	}
}

// An erasure forgets the rate-limit records of the user's address, and
// those only: another address that ends with it keeps its failures
// counted.
func TestErasureForgetsOnlyItsAddressesRateLimits(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	short := "b" + uniqueEmail()
	long := "o" + short // ends with short
	shortID, shortAccess, _ := e.signUpAs(t, short, "correct horse battery", "Short")
	_, _, _ = e.signUpAs(t, long, "correct horse battery", "Long")
	for _, address := range []string{short, long} {
		wantStatus(t, e.do(t, "POST", "/user/login", map[string]any{"email": address, "password": "wrong password"}, ""), http.StatusUnauthorized)
	}
	records := func(address string) int {
		t.Helper()
		var n int
		if err := e.pool.QueryRow(context.Background(), `SELECT
			(SELECT count(*) FROM rate_windows WHERE bucket LIKE '%:' || $1 OR bucket LIKE '% ' || $1) +
			(SELECT count(*) FROM rate_buckets WHERE bucket LIKE '%:' || $1 OR bucket LIKE '% ' || $1)`, address).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := records(long)
	if before == 0 || records(short) == 0 {
		t.Fatalf("the failed logins left no rate-limit records (%d and %d): the test proves nothing", records(short), before)
	}
	wantStatus(t, e.do(t, "DELETE", "/user/me", map[string]any{"password": "correct horse battery"}, shortAccess), http.StatusNoContent)
	if n := records(short); n != 0 {
		t.Errorf("user %d's address keeps %d rate-limit records after the erasure", shortID, n)
	}
	if n := records(long); n != before {
		t.Errorf("the other address has %d rate-limit records after the erasure, %d before", n, before)
	}
}

// The codes sent to a subaddress are counted by its mailbox
// (commands.MailboxKey): the export shows that record, and the erasure
// deletes it, though its bucket is not keyed by the address as typed.
func TestErasureForgetsTheCodesSentToItsMailbox(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	mailbox := uniqueEmail()
	address := strings.Replace(mailbox, "@", "+lectern@", 1)
	_, access, _ := e.signUpAs(t, address, "correct horse battery", "Sub")
	bucket := "send-code:" + mailbox
	count := func() int {
		t.Helper()
		var n int
		if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM rate_windows WHERE bucket = $1`, bucket).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 1 {
		t.Fatalf("%d windows %q after the sign-up's code, want 1", n, bucket)
	}
	res := e.do(t, "GET", "/user/me/export", nil, access)
	wantStatus(t, res, http.StatusOK)
	var export struct {
		RateLimitRecords []struct {
			Kind  string   `json:"kind"`
			Times []string `json:"times"`
		} `json:"rate_limit_records"`
	}
	if err := json.Unmarshal(res.Body, &export); err != nil {
		t.Fatal(err)
	}
	sent := 0
	for _, r := range export.RateLimitRecords {
		if r.Kind == "send-code" {
			sent += len(r.Times)
		}
		if len(r.Times) == 0 {
			t.Errorf("the export shows a %s record with no attempt in it", r.Kind)
		}
	}
	if sent != 1 {
		t.Errorf("the export shows %d codes sent, want 1: %+v", sent, export.RateLimitRecords)
	}
	wantStatus(t, e.do(t, "DELETE", "/user/me", map[string]any{"password": "correct horse battery"}, access), http.StatusNoContent)
	if n := count(); n != 0 {
		t.Errorf("the erasure left the window of the codes sent to %s", mailbox)
	}
}

// An admin erases a partner record made without a user account (a person
// the school named: a subject of its own): its name, e-mail and phone are
// in no table, event, export or admin read afterwards. Only admins may; a
// partner with an account goes with its user's erasure (409).
func TestAdminErasesAPartnerWithoutAccount(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	admin := asAdmin(t, e)
	s := openSchool(t, e)
	marker := "PRT" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	res := e.do(t, "POST", fmt.Sprintf("/partner/partners?org_id=%d", s.org), map[string]any{
		"org_id": s.org, "full_name": "Pat " + marker, "email": strings.ToLower(marker) + "@example.com", "phone": "+44 " + marker,
	}, s.admin.Access)
	wantStatus(t, res, http.StatusCreated)
	partnerID := num(t, res, "id")
	path := fmt.Sprintf("/admin/partners/%d/erase", partnerID)
	// A dead letter of the partner's event whose error holds the name
	// unquoted (TestAnErasureBlanksItsDeadLetters shows how one comes).
	if _, err := e.pool.Exec(context.Background(), `INSERT INTO projection_dead_letters
		(projection, event_id, event_type, stream_id, position, error, failures, status, subject)
		VALUES ('partners', $1, 'partner.created', $2, '1-1', $3, 5, 'resolved', $4)`, uuid.New(),
		fmt.Sprintf("partner-%d", partnerID), "ERROR: cannot take Pat "+marker, fmt.Sprintf("partner-%d", partnerID)); err != nil {
		t.Fatal(err)
	}
	if hits := markerHits(t, e, marker); len(hits) == 0 {
		t.Fatal("the marker is in no table before the erasure: the search finds nothing")
	}
	if stored, opened := eventHits(t, e, marker); stored != 0 || opened == 0 {
		t.Fatalf("before the erasure, %d events hold the marker as stored (want 0: sealed) and %d as read (want some)", stored, opened)
	}

	wantStatus(t, e.do(t, "POST", path, nil, ""), http.StatusUnauthorized)
	wantStatus(t, e.do(t, "POST", path, nil, e.signUp(t).Access), http.StatusForbidden)
	wantDetail(t, e.do(t, "POST", "/admin/partners/999999999/erase", nil, admin.Access), http.StatusNotFound, "Partner not found")
	wantStatus(t, e.do(t, "POST", fmt.Sprintf("/admin/partners/%d/erase", s.partner), nil, admin.Access), http.StatusConflict)

	wantStatus(t, e.do(t, "POST", path, nil, admin.Access), http.StatusNoContent)
	wantStatus(t, e.do(t, "POST", path, nil, admin.Access), http.StatusNoContent) // again: nothing new
	if hits := markerHits(t, e, marker); len(hits) != 0 {
		t.Errorf("after the erasure the marker is still in %v", hits)
	}
	if stored, opened := eventHits(t, e, marker); stored != 0 || opened != 0 {
		t.Errorf("after the erasure %d events hold the marker as stored, %d as read", stored, opened)
	}
	if n := exportHits(t, e, marker); n != 0 {
		t.Errorf("the exports hold the marker %d times", n)
	}
	if n := adminEventHits(t, e, admin, marker); n != 0 {
		t.Errorf("GET /admin/events holds the marker %d times", n)
	}
	evs := e.streamEvents(t, fmt.Sprintf("partner-%d", partnerID))
	if types := eventTypes(evs); strings.Join(types, ",") != "partner.created,partner.erased" {
		t.Errorf("the partner's stream: %v, want partner.created then one partner.erased", types)
	}
	if p := payload(t, evs[len(evs)-1]); p["actor"] != jsonNum(admin.ID) {
		t.Errorf("partner.erased %v: want the admin as actor", p)
	}
}

// poisonAgents makes the agents read model refuse an agent whose name holds
// "POISON": by casting the name to an integer (PostgreSQL quotes the value
// in its error), or, raw, by raising an error that holds the name unquoted,
// as a trigger or function of an operator's might. It is taken away when
// the test ends.
func poisonAgents(t *testing.T, e *env, raw bool) {
	t.Helper()
	body := `PERFORM NEW.name::int;`
	if raw {
		body = `RAISE EXCEPTION 'cannot take %', NEW.name;`
	}
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `CREATE OR REPLACE FUNCTION lectern_test_poison() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF strpos(NEW.name, 'POISON') > 0 THEN `+body+` END IF; RETURN NEW; END $$`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `CREATE OR REPLACE TRIGGER lectern_test_poison BEFORE INSERT ON agents
		FOR EACH ROW EXECUTE FUNCTION lectern_test_poison()`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unpoisonAgents(t, e) })
}

func unpoisonAgents(t *testing.T, e *env) {
	t.Helper()
	if _, err := e.pool.Exec(context.Background(), `DROP TRIGGER IF EXISTS lectern_test_poison ON agents`); err != nil {
		t.Error(err)
	}
}

// userDeadLetter is the one dead letter of subject's events, once its
// status is one of statuses and its error holds want.
func userDeadLetter(t *testing.T, e *env, subject, want string, statuses ...string) (projection, eventID, errText string) {
	t.Helper()
	var last string
	defer func() { t.Log("the dead letter seen last:", last) }() // shown if the wait fails
	poll.Must(t, 20*time.Second, "the dead letter of "+subject+" holding "+want, func() bool {
		var status string
		err := e.pool.QueryRow(context.Background(), `SELECT projection, event_id::text, error, status
			FROM projection_dead_letters WHERE subject = $1`, subject).Scan(&projection, &eventID, &errText, &status)
		if errors.Is(err, pgx.ErrNoRows) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		last = status + " " + errText
		return slices.Contains(statuses, status) && strings.Contains(errText, want)
	})
	return projection, eventID, errText
}

// An event a read model cannot apply is recorded as a dead letter: its
// error without the values PostgreSQL quotes, in the log as in the table,
// and with the event's subject, whose erasure blanks the error (an error
// raised with a value unquoted keeps it until then). Not parallel: the
// agents projection stops on the event until the operator's retry.
func TestAnErasureBlanksItsDeadLetters(t *testing.T) {
	e := sharedEnv(t)
	marker := "MRK" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	u := e.signUp(t)
	subject := fmt.Sprintf("user-%d", u.ID)
	ctx := context.Background()

	poisonAgents(t, e, false)
	// Through the commands: POST /agents would wait for the stopped read model.
	if _, _, err := e.svc.Commands.Agents.Create(ctx, aggregates.CreateAgent{OwnerID: u.ID, Name: "POISON " + marker, SystemPrompt: "p"}); err != nil {
		t.Fatal(err)
	}
	projection, eventID, errText := userDeadLetter(t, e, subject, "SQLSTATE 22P02", projections.DeadLetterStopped)
	if strings.Contains(errText, marker) || !strings.Contains(errText, "invalid input syntax for type integer") {
		t.Errorf("the dead letter's error %q: want the failure told without the name", errText)
	}
	if e.logs.contains(marker) {
		t.Errorf("the log holds the name PostgreSQL quoted:\n%s", strings.Join(e.logs.all(), "\n"))
	}

	// Raised unquoted, the name is in the error that the retry records.
	poisonAgents(t, e, true)
	if err := projections.ResolveDeadLetter(ctx, e.pool, projection, eventID, projections.DeadLetterRetry, "test"); err != nil {
		t.Fatal(err)
	}
	userDeadLetter(t, e, subject, "cannot take POISON "+marker, projections.DeadLetterStopped)

	// Fixed, a retry applies the event; the resolved dead letter keeps its error.
	unpoisonAgents(t, e)
	if err := projections.ResolveDeadLetter(ctx, e.pool, projection, eventID, projections.DeadLetterRetry, "test"); err != nil {
		t.Fatal(err)
	}
	userDeadLetter(t, e, subject, marker, projections.DeadLetterResolved)
	if hits := markerHits(t, e, marker); hits["projection_dead_letters"] != 1 {
		t.Fatalf("before the erasure the marker is in %v: want it in the dead letter", hits)
	}

	wantStatus(t, e.do(t, "DELETE", "/user/me", map[string]any{"password": u.Password}, u.Access), http.StatusNoContent)
	if hits := markerHits(t, e, marker); len(hits) != 0 {
		t.Errorf("after the erasure the marker is still in %v", hits)
	}
	_, gotID, errText := userDeadLetter(t, e, subject, "", projections.DeadLetterResolved)
	if gotID != eventID || errText != "[erased]" {
		t.Errorf("after the erasure the dead letter of %s is %s with %q: want its error blanked", eventID, gotID, errText)
	}
}
