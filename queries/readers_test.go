package queries_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"lectern/pgtest"
	"lectern/queries"
)

// maxSize is the largest page the API asks for (api/fields.go: size 1 to 200).
const maxSize = 200

// checkPages reads every page of a paged query at the smallest size, a
// small one and the largest, and a page far past the end, and checks that
// the pages together list want in its order, each with the total and the
// page asked for, and that a page past the end is empty but not nil (it is
// encoded as [], not null).
func checkPages[T any](t *testing.T, what string, want []int64, id func(T) int64, read func(queries.Page) (queries.List[T], error)) {
	t.Helper()
	for _, size := range []int{1, 2, maxSize} {
		last := (len(want)+size-1)/size + 1 // the first page past the end
		for n := 1; n <= last; n++ {
			checkPage(t, what, want, id, read, page(n, size))
		}
	}
	checkPage(t, what, want, id, read, page(1000000, maxSize))
}

func checkPage[T any](t *testing.T, what string, want []int64, id func(T) int64, read func(queries.Page) (queries.List[T], error), p queries.Page) {
	t.Helper()
	list, err := read(p)
	if err != nil {
		t.Fatalf("%s, page %+v: %v", what, p, err)
	}
	from := min(p.Offset(), len(want))
	to := min(from+p.Size, len(want))
	if diff := cmp.Diff(want[from:to], ids(list.Items, id)); diff != "" || list.Items == nil {
		t.Errorf("%s, page %+v (-want +got):\n%s", what, p, diff)
	}
	if list.Total != len(want) || list.Page != p {
		t.Errorf("%s, page %+v: total %d, page %+v; want %d and the page asked for", what, p, list.Total, list.Page, len(want))
	}
}

func date(s string) *time.Time {
	d, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return &d
}

// An organisation's courses page by id, whatever order they were written in;
// another organisation's are neither listed nor read.
func TestCourses(t *testing.T) {
	pool := pgtest.Fresh(t)
	q := queries.New(pool)
	ctx := context.Background()
	for _, c := range []struct{ id, org int64 }{{3, 1}, {1, 1}, {2, 2}, {5, 1}, {4, 1}} {
		fixture(t, pool, `INSERT INTO courses (id, org_id, partner_id, title, course_key, status, created_by, created_at, updated_at, version)
			VALUES ($1, $2, 5, 'course', $3, 'active', 7, $4, $4, 1)`, c.id, c.org, fmt.Sprint("KEY-", c.id), t0)
	}
	fixture(t, pool, `UPDATE courses SET start_date = '2026-12-01', end_date = '2027-03-31', description = 'Algebra' WHERE id = 3`)
	courseID := func(c queries.Course) int64 { return c.ID }
	checkPages(t, "Courses of organisation 1", []int64{1, 3, 4, 5}, courseID, func(p queries.Page) (queries.List[queries.Course], error) {
		return q.Courses(ctx, 1, p)
	})
	checkPages(t, "Courses of an organisation without any", []int64{}, courseID, func(p queries.Page) (queries.List[queries.Course], error) {
		return q.Courses(ctx, 9, p)
	})

	got, err := q.Course(ctx, 1, 3)
	want := queries.Course{ID: 3, OrgID: 1, PartnerID: 5, Title: "course", CourseKey: "KEY-3", Status: "active",
		StartDate: date("2026-12-01"), EndDate: date("2027-03-31"), Description: new("Algebra"), CreatedAt: t0, UpdatedAt: t0}
	if diff := cmp.Diff(want, got); err != nil || diff != "" {
		t.Errorf("Course(1, 3): %v (-want +got):\n%s", err, diff)
	}
	if got, err := q.Course(ctx, 1, 1); err != nil || got.StartDate != nil || got.EndDate != nil || got.Description != nil {
		t.Errorf("Course(1, 1) without dates or description: %+v, %v", got, err)
	}
	_, err = q.Course(ctx, 1, 2) // organisation 2's
	wantNotFound(t, "another organisation's course", err)
	_, err = q.Course(ctx, 1, 99)
	wantNotFound(t, "no course", err)
}

// Organisations page by id, all of them (an administrator's list).
func TestOrganisations(t *testing.T) {
	pool := pgtest.Fresh(t)
	q := queries.New(pool)
	ctx := context.Background()
	orgID := func(o queries.Organisation) int64 { return o.ID }
	read := func(p queries.Page) (queries.List[queries.Organisation], error) { return q.Organisations(ctx, p) }
	checkPages(t, "Organisations before there are any", []int64{}, orgID, read)

	for i, id := range []int64{30, 10, 20} {
		fixture(t, pool, `INSERT INTO organizations (id, name, created_by, created_at, updated_at, version)
			VALUES ($1, $2, 7, $3, $4, 1)`, id, fmt.Sprint("Org ", id), t0, t0.Add(time.Duration(i)*time.Hour))
	}
	checkPages(t, "Organisations", []int64{10, 20, 30}, orgID, read)
	list, err := q.Organisations(ctx, page(1, 1))
	want := []queries.Organisation{{ID: 10, Name: "Org 10", CreatedAt: t0, UpdatedAt: t0.Add(time.Hour)}}
	if diff := cmp.Diff(want, list.Items); err != nil || diff != "" {
		t.Errorf("Organisations, first page of one: %v (-want +got):\n%s", err, diff)
	}
}

// Promotion requests page by id, all of them or those of one status, each
// with the organisations its organisation name matches (ignoring case and
// surrounding spaces), by id.
func TestPromotionRequests(t *testing.T) {
	pool := pgtest.Fresh(t)
	q := queries.New(pool)
	ctx := context.Background()
	matchingOrganizations(t, pool)
	for _, r := range []struct {
		id      int64
		status  string
		orgName string
	}{{4, "pending", "Nowhere"}, {1, "pending", " RIVERSIDE SCHOOL"}, {3, "rejected", "lakeside\u00a0"}, {2, "approved", "Hilltop"}, {5, "pending", "Hilltop"}} {
		fixture(t, pool, `INSERT INTO promotion_requests (id, user_id, name, email, org_name, target_role, status, requested_at, updated_at, version)
			VALUES ($1, 40 + $1::bigint, 'Someone', 'someone@example.com', $2, 'partner', $3, $4, $4, 1)`, r.id, r.orgName, r.status, t0)
	}
	fixture(t, pool, `UPDATE promotion_requests SET reviewed_by = 7, reviewed_at = $1, org_id = 11, partner_id = 60, edu_category = 'school'
		WHERE id = 2`, t0.Add(time.Hour))
	requestID := func(r queries.PromotionRequest) int64 { return r.ID }
	for status, want := range map[string][]int64{
		"":         {1, 2, 3, 4, 5},
		"pending":  {1, 4, 5},
		"approved": {2},
		"unknown":  {},
	} {
		checkPages(t, fmt.Sprintf("PromotionRequests(%q)", status), want, requestID, func(p queries.Page) (queries.List[queries.PromotionRequest], error) {
			return q.PromotionRequests(ctx, status, p)
		})
	}

	list, err := q.PromotionRequests(ctx, "", page(1, maxSize))
	if err != nil || len(list.Items) != 5 {
		t.Fatalf("PromotionRequests: %+v, %v", list, err)
	}
	byID := map[int64]queries.PromotionRequest{}
	for _, r := range list.Items {
		byID[r.ID] = r
	}
	for id, want := range map[int64][]queries.OrganizationRef{
		1: {{ID: 10, Name: "Riverside School"}},
		2: {{ID: 11, Name: "Hilltop"}},
		3: {{ID: 12, Name: "\u00a0Lakeside\t"}}, // Unicode spaces, which SQL's btrim leaves
		4: {},
	} {
		if got := byID[id].Matching; got == nil || !cmp.Equal(want, got) {
			t.Errorf("request %d (%q) matches %v, want %v", id, byID[id].OrgName, got, want)
		}
	}
	reviewed := queries.PromotionRequest{ID: 2, UserID: 42, Name: "Someone", Email: "someone@example.com", OrgName: "Hilltop",
		TargetRole: "partner", EduCategory: new("school"), Status: "approved", ReviewedBy: new(int64(7)), ReviewedAt: new(t0.Add(time.Hour)),
		OrgID: new(int64(11)), PartnerID: new(int64(60)), RequestedAt: t0, Matching: []queries.OrganizationRef{{ID: 11, Name: "Hilltop"}}}
	if diff := cmp.Diff(reviewed, byID[2]); diff != "" {
		t.Errorf("a reviewed request (-want +got):\n%s", diff)
	}
	if r := byID[4]; r.Reason != nil || r.ReviewedBy != nil || r.ReviewedAt != nil || r.OrgID != nil || r.PartnerID != nil || r.EduCategory != nil {
		t.Errorf("a pending request reads review fields: %+v", r)
	}
}

// A partner record is read by id; a user's partner records are listed by id,
// active or not; the organisations a user is an active partner of are listed
// once each, by id.
func TestPartners(t *testing.T) {
	pool := pgtest.Fresh(t)
	q := queries.New(pool)
	ctx := context.Background()
	for _, p := range []struct {
		id, org int64
		user    *int64
		active  bool
	}{
		{23, 3, new(int64(7)), true},
		{21, 1, new(int64(7)), true},
		{25, 1, new(int64(7)), true}, // a second record in organisation 1
		{22, 2, new(int64(7)), false},
		{24, 3, new(int64(8)), true},
		{26, 4, nil, true}, // not tied to a user
	} {
		fixture(t, pool, `INSERT INTO partners (id, org_id, user_id, full_name, email, role, is_active, created_at, updated_at, version)
			VALUES ($1, $2, $3, 'Teacher', 'teacher@example.com', 'teacher', $4, $5, $5, 1)`, p.id, p.org, p.user, p.active, t0)
	}
	fixture(t, pool, `UPDATE partners SET phone = '+44 20 7946 0000', last_login_at = $1 WHERE id = 21`, t0.Add(time.Hour))

	got, err := q.Partner(ctx, 21)
	want := queries.Partner{ID: 21, OrgID: 1, UserID: new(int64(7)), FullName: "Teacher", Email: "teacher@example.com",
		Phone: new("+44 20 7946 0000"), Role: "teacher", IsActive: true, CreatedAt: t0, UpdatedAt: t0, LastLoginAt: new(t0.Add(time.Hour))}
	if diff := cmp.Diff(want, got); err != nil || diff != "" {
		t.Errorf("Partner(21): %v (-want +got):\n%s", err, diff)
	}
	if got, err := q.Partner(ctx, 26); err != nil || got.UserID != nil || got.Phone != nil || got.LastLoginAt != nil {
		t.Errorf("Partner(26), tied to no user: %+v, %v", got, err)
	}
	_, err = q.Partner(ctx, 99)
	wantNotFound(t, "no partner", err)

	for user, want := range map[int64][]int64{7: {21, 22, 23, 25}, 8: {24}, 9: {}} {
		if got, err := q.PartnerIDsOfUser(ctx, user); err != nil || got == nil || !cmp.Equal(want, got) {
			t.Errorf("PartnerIDsOfUser(%d) = %v, %v; want %v", user, got, err, want)
		}
	}
	for user, want := range map[int64][]int64{7: {1, 3}, 8: {3}, 9: {}} {
		if got, err := q.ActivePartnerOrgs(ctx, user); err != nil || got == nil || !cmp.Equal(want, got) {
			t.Errorf("ActivePartnerOrgs(%d) = %v, %v; want %v", user, got, err, want)
		}
	}
}

// A document's search settings are read only by its owner; a document
// without settings, or another user's, is not found.
func TestKnowledgeSettings(t *testing.T) {
	pool := pgtest.Fresh(t)
	q := queries.New(pool)
	ctx := context.Background()
	for _, d := range []struct{ id, owner int64 }{{1, 1}, {2, 1}, {3, 2}} {
		fixture(t, pool, `INSERT INTO knowledge_documents (id, user_id, title, content_type, size, created_at, updated_at, version)
			VALUES ($1, $2, 'doc', 'text/plain', 10, $3, $3, 1)`, d.id, d.owner, t0)
	}
	fixture(t, pool, `INSERT INTO knowledge_settings (knowledge_id, top_k, min_score, score_type, reranker_enabled, reranker_model, reranker_top_n, created_at, updated_at, version)
		VALUES (1, 8, '0.25', 'cosine', true, 'rerank-small', 3, $1, $2, 2), (3, 5, '0', 'cosine', false, NULL, 5, $1, $1, 1)`, t0, t0.Add(time.Hour))

	got, err := q.KnowledgeSettings(ctx, 1, 1)
	want := queries.KnowledgeSettings{KnowledgeID: 1, TopK: 8, MinScore: "0.25", ScoreType: "cosine", RerankerEnabled: true,
		RerankerModel: new("rerank-small"), RerankerTopN: 3, CreatedAt: t0, UpdatedAt: t0.Add(time.Hour)}
	if diff := cmp.Diff(want, got); err != nil || diff != "" {
		t.Errorf("KnowledgeSettings(1, 1): %v (-want +got):\n%s", err, diff)
	}
	if got, err := q.KnowledgeSettings(ctx, 2, 3); err != nil || got.RerankerModel != nil || got.RerankerEnabled {
		t.Errorf("KnowledgeSettings(2, 3) without a reranker: %+v, %v", got, err)
	}
	_, err = q.KnowledgeSettings(ctx, 1, 3) // user 2's
	wantNotFound(t, "another user's document's settings", err)
	_, err = q.KnowledgeSettings(ctx, 1, 2)
	wantNotFound(t, "a document without settings", err)
	_, err = q.KnowledgeSettings(ctx, 1, 99)
	wantNotFound(t, "no document", err)
}

// A reindex job is read by its owner, through its own document only.
func TestReindexJob(t *testing.T) {
	pool := pgtest.Fresh(t)
	q := queries.New(pool)
	ctx := context.Background()
	fixture(t, pool, `INSERT INTO knowledge_reindex_jobs (job_id, knowledge_id, user_id, status, requested_at, started_at, finished_at, chunks_total, chunks_done, error)
		VALUES (5, 1, 1, 'failed', $1, $2, $3, 12, 7, 'embedding provider unavailable'),
		       (6, 1, 1, 'queued', $3, NULL, NULL, 0, 0, NULL),
		       (7, 3, 2, 'done', $1, $2, $3, 4, 4, NULL)`, t0, t0.Add(time.Minute), t0.Add(2*time.Minute))

	got, err := q.ReindexJob(ctx, 1, 1, 5)
	want := queries.ReindexJob{JobID: 5, KnowledgeID: 1, Status: "failed", RequestedAt: t0, StartedAt: new(t0.Add(time.Minute)),
		FinishedAt: new(t0.Add(2 * time.Minute)), ChunksTotal: 12, ChunksDone: 7, Error: new("embedding provider unavailable")}
	if diff := cmp.Diff(want, got); err != nil || diff != "" {
		t.Errorf("ReindexJob(1, 1, 5): %v (-want +got):\n%s", err, diff)
	}
	queued := queries.ReindexJob{JobID: 6, KnowledgeID: 1, Status: "queued", RequestedAt: t0.Add(2 * time.Minute)}
	if got, err := q.ReindexJob(ctx, 1, 1, 6); err != nil || !cmp.Equal(queued, got) {
		t.Errorf("ReindexJob(1, 1, 6), not started: %+v, %v; want %+v", got, err, queued)
	}
	for _, c := range []struct {
		what                    string
		owner, knowledge, jobID int64
	}{
		{"another user's job", 1, 3, 7},
		{"a job of another document", 1, 2, 5},
		{"another user asking for the owner's job", 2, 1, 5},
		{"no job", 1, 1, 99},
	} {
		_, err := q.ReindexJob(ctx, c.owner, c.knowledge, c.jobID)
		wantNotFound(t, c.what, err)
	}
}

// A practice turn reads a class of any organisation with the caller's
// standing in it: enrolled (an active enrollment) and partner (an active
// partner of the class's organisation).
func TestPracticeClass(t *testing.T) {
	pool := pgtest.Fresh(t)
	q := queries.New(pool)
	ctx := context.Background()
	fixture(t, pool, `INSERT INTO classes (id, org_id, partner_id, name, status, invite_only, primary_model_id, allowed_model_ids, created_by, created_at, updated_at, version)
		VALUES (11, 1, 5, 'class', 'active', false, 3, '{3,4}', 7, $1, $1, 1),
		       (12, 2, 6, 'class', 'active', false, NULL, '{}', 7, $1, $1, 1)`, t0)
	for _, e := range []struct {
		id, class, student int64
		status             string
	}{{31, 11, 40, "active"}, {32, 11, 41, "dropped"}, {33, 12, 41, "active"}} {
		fixture(t, pool, `INSERT INTO enrollments (id, class_id, org_id, partner_id, student_id, status, enrolled_at, source, enrolled_by, created_at, updated_at, version)
			VALUES ($1, $2, 1, 5, $3, $4, $5, 'partner', 7, $5, $5, 1)`, e.id, e.class, e.student, e.status, t0)
	}
	for _, p := range []struct {
		id, org, user int64
		active        bool
	}{{21, 1, 50, true}, {22, 1, 51, false}, {23, 2, 52, true}} {
		fixture(t, pool, `INSERT INTO partners (id, org_id, user_id, full_name, email, role, is_active, created_at, updated_at, version)
			VALUES ($1, $2, $3, 'Teacher', 'teacher@example.com', 'teacher', $4, $5, $5, 1)`, p.id, p.org, p.user, p.active, t0)
	}

	for _, c := range []struct {
		what                 string
		caller               int64
		enrolled, orgPartner bool
	}{
		{"an enrolled student", 40, true, false},
		{"a student whose enrollment was dropped", 41, false, false},
		{"an active partner of the organisation", 50, false, true},
		{"an inactive partner of the organisation", 51, false, false},
		{"a partner of another organisation", 52, false, false},
		{"a stranger", 99, false, false},
	} {
		got, err := q.PracticeClass(ctx, c.caller, 11)
		want := queries.PracticeClass{ID: 11, OrgID: 1, PartnerID: 5, PrimaryModelID: new(int64(3)), AllowedModelIDs: []int64{3, 4},
			Enrolled: c.enrolled, OrgPartner: c.orgPartner}
		if diff := cmp.Diff(want, got); err != nil || diff != "" {
			t.Errorf("%s: %v (-want +got):\n%s", c.what, err, diff)
		}
	}
	got, err := q.PracticeClass(ctx, 41, 12)
	if err != nil || !got.Enrolled || got.PrimaryModelID != nil || got.AllowedModelIDs == nil || len(got.AllowedModelIDs) != 0 {
		t.Errorf("PracticeClass(41, 12), no models set: %+v, %v (want no primary, an empty, non-nil allowed list)", got, err)
	}
	_, err = q.PracticeClass(ctx, 40, 99)
	wantNotFound(t, "no class", err)
}

// A session's detail: the session, its settings, its few-shot links by sort
// order (an example not the owner's, or not projected yet, reads as none)
// and every response by turn and position, whatever order they were written
// in; a session without settings yet, or another user's, is not found.
func TestSessionDetail(t *testing.T) {
	pool := pgtest.Fresh(t)
	q := queries.New(pool)
	ctx := context.Background()
	fixture(t, pool, `INSERT INTO practice_sessions (id, user_id, class_id, agent_id, knowledge_ids, title, created_at, updated_at, version)
		VALUES (5, 1, 11, 3, '{2,1}', 'Fractions', $1, $2, 3),
		       (6, 1, NULL, NULL, '{}', NULL, $1, $1, 1),
		       (7, 1, NULL, NULL, '{}', NULL, $1, $1, 1),
		       (8, 2, NULL, NULL, '{}', NULL, $1, $1, 1)`, t0, t0.Add(time.Hour))
	fixture(t, pool, `INSERT INTO session_settings (id, session_id, style_preset, style_params, generation_params, agent_snapshot, created_at, updated_at)
		VALUES (50, 5, 'socratic', '{"tone":"warm"}', '{"temperature":0.2}', '{"name":"Tutor"}', $1, $1),
		       (51, 6, 'plain', '{}', '{}', '{}', $1, $1),
		       (52, 8, 'plain', '{}', '{}', '{}', $1, $1)`, t0)
	for _, x := range []struct{ id, owner int64 }{{8, 1}, {9, 2}} {
		fixture(t, pool, `INSERT INTO few_shot_examples (id, user_id, title, input_text, output_text, meta, is_active, created_at, updated_at, version)
			VALUES ($1, $2, 'example', 'in', 'out', '{}', true, $3, $3, 1)`, x.id, x.owner, t0)
	}
	// Links 61 (sort 2, example 8), 62 (sort 1, user 2's example 9), 60
	// (sort 1, example 10, not projected yet), and one of another session.
	fixture(t, pool, `INSERT INTO session_few_shot_links (id, setting_id, session_id, example_id, sort_order, created_at)
		VALUES (61, 50, 5, 8, 2, $1), (62, 50, 5, 9, 1, $1), (60, 50, 5, 10, 1, $1), (63, 51, 6, 8, 0, $1)`, t0)
	// Responses written out of order: turn 2 before turn 1, positions reversed.
	for _, r := range []struct {
		id             int64
		turn, position int
		err            *string
	}{{74, 2, 1, nil}, {73, 2, 0, new(`{"kind":"timeout"}`)}, {72, 1, 1, nil}, {71, 1, 0, nil}, {75, 1, 0, nil}} {
		session := int64(5)
		if r.id == 75 {
			session = 6
		}
		fixture(t, pool, `INSERT INTO session_responses (id, session_id, session_model_id, turn, position, model_name, prompt_text, response_text,
				token_usage, latency_ms, is_primary, generation_params, error, created_at)
			VALUES ($1, $2, 90 + $4, $3, $4, 'model', 'prompt', 'answer', '{"total":10}', 120, $4 = 0, '{}', $5, $6)`,
			r.id, session, r.turn, r.position, r.err, t0.Add(time.Duration(r.turn)*time.Minute))
	}

	got, err := q.Session(ctx, 1, 5)
	if err != nil {
		t.Fatalf("Session(1, 5): %v", err)
	}
	session := queries.PracticeSession{ID: 5, UserID: 1, ClassID: new(int64(11)), AgentID: new(int64(3)), KnowledgeIDs: []int64{2, 1},
		Title: new("Fractions"), CreatedAt: t0, UpdatedAt: t0.Add(time.Hour)}
	if diff := cmp.Diff(session, got.PracticeSession); diff != "" {
		t.Errorf("the session (-want +got):\n%s", diff)
	}
	st := got.Settings
	if st.SettingID != 50 || st.SessionID != 5 || st.StylePreset != "socratic" || !jsonEqual(st.StyleParams, `{"tone":"warm"}`) ||
		!jsonEqual(st.GenerationParams, `{"temperature":0.2}`) || !jsonEqual(st.AgentSnapshot, `{"name":"Tutor"}`) ||
		!st.CreatedAt.Equal(t0) || !st.UpdatedAt.Equal(t0) {
		t.Errorf("settings %+v", st)
	}
	linkID := func(l queries.SessionFewShotLink) int64 { return l.ID }
	if diff := cmp.Diff([]int64{60, 62, 61}, ids(st.FewShotLinks, linkID)); diff != "" {
		t.Fatalf("few-shot links by sort order, then id (-want +got):\n%s", diff)
	}
	for i, want := range []*int64{nil, nil, new(int64(8))} {
		l := st.FewShotLinks[i]
		if (l.Example == nil) != (want == nil) || (l.Example != nil && (l.Example.ID != *want || l.Example.UserID != 1 || l.Example.InputText != "in")) {
			t.Errorf("link %d (example %d): example %+v, want %v", l.ID, l.ExampleID, l.Example, want)
		}
		if l.SettingID != 50 || !l.CreatedAt.Equal(t0) {
			t.Errorf("link %+v", l)
		}
	}
	responseID := func(r queries.SessionResponse) int64 { return r.ID }
	if diff := cmp.Diff([]int64{71, 72, 73, 74}, ids(got.Responses, responseID)); diff != "" {
		t.Fatalf("responses by turn, then position (-want +got):\n%s", diff)
	}
	for _, r := range got.Responses {
		failed := r.ID == 73
		if r.SessionID != 5 || r.ModelName != "model" || r.PromptText != "prompt" || r.ResponseText != "answer" ||
			!jsonEqual(r.TokenUsage, `{"total":10}`) || r.LatencyMS != 120 || r.IsPrimary != (r.ID == 71 || r.ID == 73) ||
			(r.Error != nil) != failed || (failed && !jsonEqual(r.Error, `{"kind":"timeout"}`)) {
			t.Errorf("response %+v (error %s)", r, r.Error)
		}
	}

	// Settings but no links and one response; no settings yet; another user's.
	if got, err := q.Session(ctx, 1, 6); err != nil || got.Settings.FewShotLinks == nil || len(got.Settings.FewShotLinks) != 1 ||
		len(got.Responses) != 1 || got.KnowledgeIDs == nil {
		t.Errorf("Session(1, 6): %+v, %v", got, err)
	}
	fixture(t, pool, `DELETE FROM session_few_shot_links WHERE session_id = 6`)
	fixture(t, pool, `DELETE FROM session_responses WHERE session_id = 6`)
	if got, err := q.Session(ctx, 1, 6); err != nil || got.Settings.FewShotLinks == nil || len(got.Settings.FewShotLinks) != 0 ||
		got.Responses == nil || len(got.Responses) != 0 {
		t.Errorf("Session(1, 6) without links or responses: %+v, %v (want empty, non-nil lists)", got, err)
	}
	_, err = q.Session(ctx, 1, 7)
	wantNotFound(t, "a session without settings yet", err)
	_, err = q.Session(ctx, 1, 8)
	wantNotFound(t, "another user's session", err)
	_, err = q.Session(ctx, 1, 99)
	wantNotFound(t, "no session", err)
}

func jsonEqual(got json.RawMessage, want string) bool {
	var g, w any
	return json.Unmarshal(got, &g) == nil && json.Unmarshal([]byte(want), &w) == nil && cmp.Equal(g, w)
}

// An owner's knowledge documents page by id, with their chunk counts; another
// owner's are neither listed nor read.
func TestKnowledgeDocumentsPaging(t *testing.T) {
	pool := pgtest.Fresh(t)
	q := queries.New(pool)
	ctx := context.Background()
	for _, d := range []struct{ id, owner int64 }{{4, 1}, {2, 1}, {6, 2}, {1, 1}, {5, 1}, {3, 1}} {
		fixture(t, pool, `INSERT INTO knowledge_documents (id, user_id, title, content_type, size, created_at, updated_at, version)
			VALUES ($1, $2, $3, 'text/plain', 10 * $1::bigint, $4, $4, 1)`, d.id, d.owner, fmt.Sprint("doc ", d.id), t0)
	}
	// Document 3 has three chunks, 6 (another owner's) one.
	for i, k := range []int64{3, 3, 3, 6} {
		fixture(t, pool, `INSERT INTO knowledge_chunks (id, knowledge_id, ord, text, embedding) VALUES ($1, $2, $3, 'x', '{0.5}')`, 100+i, k, i)
	}
	docID := func(d queries.KnowledgeDocument) int64 { return d.ID }
	checkPages(t, "KnowledgeDocuments of owner 1", []int64{1, 2, 3, 4, 5}, docID, func(p queries.Page) (queries.List[queries.KnowledgeDocument], error) {
		return q.KnowledgeDocuments(ctx, 1, p)
	})
	checkPages(t, "KnowledgeDocuments of an owner without any", []int64{}, docID, func(p queries.Page) (queries.List[queries.KnowledgeDocument], error) {
		return q.KnowledgeDocuments(ctx, 9, p)
	})
	list, err := q.KnowledgeDocuments(ctx, 1, page(2, 2))
	want := []queries.KnowledgeDocument{
		{ID: 3, UserID: 1, Title: "doc 3", ContentType: "text/plain", Size: 30, Chunks: 3, CreatedAt: t0, UpdatedAt: t0},
		{ID: 4, UserID: 1, Title: "doc 4", ContentType: "text/plain", Size: 40, Chunks: 0, CreatedAt: t0, UpdatedAt: t0},
	}
	if diff := cmp.Diff(want, list.Items); err != nil || diff != "" {
		t.Errorf("KnowledgeDocuments(1), second page of two: %v (-want +got):\n%s", err, diff)
	}
	if got, err := q.KnowledgeDocument(ctx, 1, 3); err != nil || !cmp.Equal(want[0], got) {
		t.Errorf("KnowledgeDocument(1, 3) = %+v, %v; want %+v", got, err, want[0])
	}
	_, err = q.KnowledgeDocument(ctx, 1, 6)
	wantNotFound(t, "another owner's document", err)
	_, err = q.KnowledgeDocument(ctx, 1, 99)
	wantNotFound(t, "no document", err)
}
