package queries_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/derrors"
	"lectern/pgtest"
	"lectern/queries"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var t0 = time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)

// fixture inserts read-model rows directly: the read side is tested on its
// own, whatever the projections write.
func fixture(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("fixture %q: %v", sql, err)
	}
}

func ids[T any](items []T, id func(T) int64) []int64 {
	out := []int64{}
	for _, x := range items {
		out = append(out, id(x))
	}
	return out
}

func page(p, size int) queries.Page { return queries.Page{Page: p, Size: size} }

func wantNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, derrors.ErrNotFound) {
		t.Errorf("%s: %v, want not found", what, err)
	}
}

func TestAgents(t *testing.T) {
	pool := pgtest.Fresh(t)
	q := queries.New(pool)
	ctx := context.Background()
	// Owner 1 has agents 3, 1, 5 (inserted out of order); owner 2 has 2.
	for _, a := range []struct{ id, owner int64 }{{3, 1}, {1, 1}, {2, 2}, {5, 1}} {
		fixture(t, pool, `INSERT INTO agents (id, owner_id, name, system_prompt, is_active, created_at, updated_at, version)
			VALUES ($1, $2, 'a', 'p', true, $3, $3, 1)`, a.id, a.owner, t0)
	}
	agentID := func(a queries.Agent) int64 { return a.ID }
	for _, c := range []struct {
		p    queries.Page
		want []int64
	}{
		{page(1, 50), []int64{1, 3, 5}}, // by id, whatever the insertion order
		{page(1, 2), []int64{1, 3}},
		{page(2, 2), []int64{5}},
		{page(3, 2), []int64{}}, // past the end: empty, with the total
		{page(1000000, 200), []int64{}},
	} {
		list, err := q.Agents(ctx, 1, c.p)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(c.want, ids(list.Items, agentID)); diff != "" || list.Total != 3 || list.Page != c.p {
			t.Errorf("page %+v: total %d (-want +got):\n%s", c.p, list.Total, diff)
		}
	}
	if list, err := q.Agents(ctx, 9, page(1, 50)); err != nil || list.Total != 0 || list.Items == nil || len(list.Items) != 0 {
		t.Errorf("an owner without agents: %+v, %v (want an empty, non-nil page)", list, err)
	}
	a, err := q.Agent(ctx, 1, 3)
	if err != nil || a.ID != 3 || a.OwnerID != 1 || !a.CreatedAt.Equal(t0) || a.RoleDescription != nil {
		t.Errorf("Agent(1, 3) = %+v, %v", a, err)
	}
	_, err = q.Agent(ctx, 1, 2) // owner 2's
	wantNotFound(t, "another owner's agent", err)
	_, err = q.Agent(ctx, 1, 99)
	wantNotFound(t, "no agent", err)
}

func TestFewShotExamples(t *testing.T) {
	pool := pgtest.Fresh(t)
	q := queries.New(pool)
	ctx := context.Background()
	for _, x := range []struct {
		id, owner int64
		active    bool
	}{{1, 1, true}, {2, 1, false}, {3, 2, true}, {4, 1, true}} {
		fixture(t, pool, `INSERT INTO few_shot_examples (id, user_id, title, input_text, output_text, meta, is_active, created_at, updated_at, version)
			VALUES ($1, $2, NULL, 'in', 'out', '{"k":1}', $3, $4, $4, 1)`, x.id, x.owner, x.active, t0)
	}
	exampleID := func(x queries.FewShotExample) int64 { return x.ID }
	yes, no := true, false
	for _, c := range []struct {
		name   string
		active *bool
		p      queries.Page
		want   []int64
		total  int
	}{
		{"all", nil, page(1, 50), []int64{1, 2, 4}, 3},
		{"active", &yes, page(1, 50), []int64{1, 4}, 2},
		{"inactive", &no, page(1, 50), []int64{2}, 1},
		{"active, second page of one", &yes, page(2, 1), []int64{4}, 2},
		{"past the end", nil, page(4, 1), []int64{}, 3},
	} {
		list, err := q.ListFewShotExamples(ctx, 1, c.active, c.p)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(c.want, ids(list.Items, exampleID)); diff != "" || list.Total != c.total {
			t.Errorf("%s: total %d, want %d (-want +got):\n%s", c.name, list.Total, c.total, diff)
		}
	}
	// By ids: in the order asked, twice if asked twice, another owner's and
	// unknown ids left out.
	got, err := q.FewShotExamples(ctx, 1, []int64{4, 3, 1, 99, 4, 2})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{4, 1, 4, 2}, ids(got, exampleID)); diff != "" {
		t.Errorf("FewShotExamples (-want +got):\n%s", diff)
	}
	if got, err := q.FewShotExamples(ctx, 1, nil); err != nil || got == nil || len(got) != 0 {
		t.Errorf("no ids: %v, %v (want an empty, non-nil slice)", got, err)
	}
	x, err := q.FewShotExample(ctx, 1, 2)
	if err != nil || x.Title != nil || x.IsActive || string(x.Meta) != `{"k":1}` {
		t.Errorf("FewShotExample(1, 2) = %+v, %v", x, err)
	}
	_, err = q.FewShotExample(ctx, 1, 3)
	wantNotFound(t, "another owner's example", err)
}

func TestKnowledgeDocuments(t *testing.T) {
	pool := pgtest.Fresh(t)
	q := queries.New(pool)
	ctx := context.Background()
	for _, d := range []struct{ id, owner int64 }{{2, 1}, {1, 1}, {3, 2}} {
		fixture(t, pool, `INSERT INTO knowledge_documents (id, user_id, title, content_type, size, created_at, updated_at, version)
			VALUES ($1, $2, 'doc', 'text/plain', 10, $3, $3, 1)`, d.id, d.owner, t0)
	}
	// Document 2 has two chunks.
	for i := range 2 {
		fixture(t, pool, `INSERT INTO knowledge_chunks (id, knowledge_id, ord, text, embedding) VALUES ($1, 2, $2, 'x', '{0.5}')`, 100+i, i)
	}
	list, err := q.KnowledgeDocuments(ctx, 1, page(1, 50))
	if err != nil {
		t.Fatal(err)
	}
	docID := func(d queries.KnowledgeDocument) int64 { return d.ID }
	if diff := cmp.Diff([]int64{1, 2}, ids(list.Items, docID)); diff != "" || list.Total != 2 {
		t.Errorf("KnowledgeDocuments: total %d (-want +got):\n%s", list.Total, diff)
	}
	if len(list.Items) == 2 && (list.Items[0].Chunks != 0 || list.Items[1].Chunks != 2) {
		t.Errorf("chunks %d and %d, want 0 and 2", list.Items[0].Chunks, list.Items[1].Chunks)
	}
	owned, err := q.OwnedKnowledge(ctx, 1, []int64{1, 3, 42})
	if err != nil || !owned[1] || owned[3] || owned[42] {
		t.Errorf("OwnedKnowledge = %v, %v; want only 1", owned, err)
	}
	_, err = q.KnowledgeDocument(ctx, 1, 3)
	wantNotFound(t, "another owner's document", err)
}

func TestUsers(t *testing.T) {
	pool := pgtest.Fresh(t)
	q := queries.New(pool)
	ctx := context.Background()
	fixture(t, pool, `INSERT INTO users (id, email, name, roles, created_at, updated_at, version)
		VALUES (7, 'ada@example.com', 'Ada', '{user,partner}', $1, $1, 2)`, t0)
	u, err := q.UserByEmail(ctx, "ada@example.com")
	if err != nil || u.ID != 7 || !cmp.Equal(u.Roles, []string{"user", "partner"}) {
		t.Errorf("UserByEmail = %+v, %v", u, err)
	}
	if u, err := q.UserByID(ctx, 7); err != nil || u.Email != "ada@example.com" {
		t.Errorf("UserByID = %+v, %v", u, err)
	}
	_, err = q.UserByEmail(ctx, "ADA@example.com") // callers normalise; the query does not
	wantNotFound(t, "an e-mail of other case", err)
	_, err = q.UserByID(ctx, 8)
	wantNotFound(t, "no user", err)
}

// The session list is newest first, its total kept by the projection (not
// counted), whatever page is asked for.
func TestSessions(t *testing.T) {
	pool := pgtest.Fresh(t)
	q := queries.New(pool)
	ctx := context.Background()
	for _, s := range []struct{ id, user int64 }{{1, 1}, {4, 1}, {2, 2}, {6, 1}, {3, 1}} {
		fixture(t, pool, `INSERT INTO practice_sessions (id, user_id, knowledge_ids, created_at, updated_at, version)
			VALUES ($1, $2, '{}', $3, $3, 1)`, s.id, s.user, t0)
	}
	fixture(t, pool, `INSERT INTO practice_session_counts (user_id, total) VALUES (1, 4), (2, 1)`)
	sessionID := func(s queries.PracticeSession) int64 { return s.ID }
	for _, c := range []struct {
		p    queries.Page
		want []int64
	}{
		{page(1, 50), []int64{6, 4, 3, 1}},
		{page(1, 3), []int64{6, 4, 3}},
		{page(2, 3), []int64{1}},
		{page(3, 3), []int64{}},
		{page(1000000, 200), []int64{}},
	} {
		list, err := q.Sessions(ctx, 1, c.p)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(c.want, ids(list.Items, sessionID)); diff != "" || list.Total != 4 {
			t.Errorf("page %+v: total %d, want 4 (-want +got):\n%s", c.p, list.Total, diff)
		}
		for _, s := range list.Items {
			if s.KnowledgeIDs == nil || s.UserID != 1 {
				t.Errorf("session %+v", s)
			}
		}
	}
	if list, err := q.Sessions(ctx, 9, page(1, 50)); err != nil || list.Total != 0 || len(list.Items) != 0 {
		t.Errorf("a user without sessions: %+v, %v", list, err)
	}
	_, err := q.Session(ctx, 1, 2) // user 2's
	wantNotFound(t, "another user's session", err)
}

// Classes come oldest first, each with its invite codes (in code order),
// only the organisation's; enrollments list by class and by student.
func TestClassesAndEnrollments(t *testing.T) {
	pool := pgtest.Fresh(t)
	q := queries.New(pool)
	ctx := context.Background()
	for _, c := range []struct{ id, org int64 }{{12, 1}, {11, 1}, {13, 2}} {
		fixture(t, pool, `INSERT INTO classes (id, org_id, partner_id, name, status, invite_only, allowed_model_ids, created_by, created_at, updated_at, version)
			VALUES ($1, $2, 5, 'class', 'active', false, '{}', 7, $3, $3, 1)`, c.id, c.org, t0)
	}
	for _, ic := range []struct {
		id, class int64
		code      string
	}{{22, 11, "B"}, {21, 11, "A"}, {23, 12, "C"}, {24, 13, "D"}} {
		fixture(t, pool, `INSERT INTO invite_codes (id, class_id, org_id, partner_id, code, target_role, max_uses, used_count, status, expires_at, created_by, created_at, updated_at, version)
			VALUES ($1, $2, 1, 5, $3, 'student', 30, 0, 'active', $4, 7, $4, $4, 1)`, ic.id, ic.class, ic.code, t0.Add(24*time.Hour))
	}
	for _, e := range []struct{ id, class, student int64 }{{31, 11, 40}, {32, 11, 41}, {33, 12, 40}} {
		fixture(t, pool, `INSERT INTO enrollments (id, class_id, org_id, partner_id, student_id, status, enrolled_at, source, enrolled_by, created_at, updated_at, version)
			VALUES ($1, $2, 1, 5, $3, 'active', $4, 'partner', 7, $4, $4, 1)`, e.id, e.class, e.student, t0)
	}

	list, err := q.Classes(ctx, 1, page(1, 50))
	if err != nil {
		t.Fatal(err)
	}
	classID := func(c queries.Class) int64 { return c.ID }
	if diff := cmp.Diff([]int64{11, 12}, ids(list.Items, classID)); diff != "" || list.Total != 2 {
		t.Fatalf("Classes: total %d (-want +got):\n%s", list.Total, diff)
	}
	codeID := func(ic queries.InviteCode) int64 { return ic.ID }
	if diff := cmp.Diff([]int64{21, 22}, ids(list.Items[0].InviteCodes, codeID)); diff != "" {
		t.Errorf("class 11's codes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int64{23}, ids(list.Items[1].InviteCodes, codeID)); diff != "" {
		t.Errorf("class 12's codes (-want +got):\n%s", diff)
	}
	if list, err := q.Classes(ctx, 1, page(2, 50)); err != nil || len(list.Items) != 0 || list.Total != 2 {
		t.Errorf("past the end: %+v, %v", list, err)
	}
	_, err = q.Class(ctx, 1, 13) // organisation 2's
	wantNotFound(t, "another organisation's class", err)

	enrollmentID := func(e queries.Enrollment) int64 { return e.ID }
	byClass, err := q.ClassEnrollments(ctx, 11, page(1, 1))
	if err != nil || byClass.Total != 2 || !cmp.Equal(ids(byClass.Items, enrollmentID), []int64{31}) {
		t.Errorf("ClassEnrollments(11), first page of one: %+v, %v", byClass, err)
	}
	byStudent, err := q.StudentEnrollments(ctx, 40, page(1, 50))
	if err != nil || byStudent.Total != 2 || !cmp.Equal(ids(byStudent.Items, enrollmentID), []int64{31, 33}) {
		t.Errorf("StudentEnrollments(40): %+v, %v", byStudent, err)
	}
}

// matchingOrganizations inserts organisations 10 and 12, whose names match
// "riverside school" ignoring case and surrounding spaces, and 11, Hilltop.
func matchingOrganizations(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	for _, o := range []struct {
		id   int64
		name string
	}{{12, "\u00a0Lakeside\t"}, {10, "Riverside School"}, {11, "Hilltop"}} {
		fixture(t, pool, `INSERT INTO organizations (id, name, created_by, created_at, updated_at, version)
			VALUES ($1, $2, 7, $3, $3, 1)`, o.id, o.name, t0)
		// Its name's claim, as commands.CreateOrganisation makes it.
		fixture(t, pool, `INSERT INTO unique_claims (scope, key, owner) VALUES ($1, $2, $3)`,
			queries.OrgNameClaim, queries.OrgNameKey(o.name), "org-"+strconv.FormatInt(o.id, 10))
	}
}
