package queries_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/derrors"
	"lectern/pgtest"
	"lectern/queries"
)

// A class's enrollments and a student's page by id (oldest first), whatever
// order they were written in, at every page size and past the end; another
// class's or student's are not listed.
func TestEnrollmentPages(t *testing.T) {
	pool := pgtest.Fresh(t)
	q := queries.New(pool)
	ctx := context.Background()
	for _, e := range []struct{ id, class, student int64 }{
		{35, 11, 40}, {31, 11, 41}, {38, 12, 40}, {33, 11, 40}, {32, 13, 41}, {36, 11, 42}, {34, 12, 40}, {37, 11, 43},
	} {
		at := t0.Add(time.Duration(e.id) * time.Minute)
		fixture(t, pool, `INSERT INTO enrollments (id, class_id, org_id, partner_id, student_id, status, enrolled_at, source, enrolled_by, created_at, updated_at, version)
			VALUES ($1, $2, 1, 5, $3, 'active', $4, 'partner', 7, $4, $4, 1)`, e.id, e.class, e.student, at)
	}
	fixture(t, pool, `UPDATE enrollments SET status = 'dropped', invite_code_id = 21, completed_at = $1, updated_at = $1, version = 2
		WHERE id = 33`, t0.Add(time.Hour))
	enrollmentID := func(e queries.Enrollment) int64 { return e.ID }
	for class, want := range map[int64][]int64{11: {31, 33, 35, 36, 37}, 12: {34, 38}, 13: {32}, 99: {}} {
		checkPages(t, fmt.Sprintf("ClassEnrollments(%d)", class), want, enrollmentID, func(p queries.Page) (queries.List[queries.Enrollment], error) {
			return q.ClassEnrollments(ctx, class, p)
		})
	}
	for student, want := range map[int64][]int64{40: {33, 34, 35, 38}, 41: {31, 32}, 43: {37}, 99: {}} {
		checkPages(t, fmt.Sprintf("StudentEnrollments(%d)", student), want, enrollmentID, func(p queries.Page) (queries.List[queries.Enrollment], error) {
			return q.StudentEnrollments(ctx, student, p)
		})
	}

	// A row reads in full, by class and by student alike.
	want := queries.Enrollment{ID: 33, ClassID: 11, OrgID: 1, StudentID: 40, InviteCodeID: new(int64(21)), Status: "dropped",
		EnrolledAt: t0.Add(33 * time.Minute), CompletedAt: new(t0.Add(time.Hour)), CreatedAt: t0.Add(33 * time.Minute), UpdatedAt: t0.Add(time.Hour)}
	byClass, err := q.ClassEnrollments(ctx, 11, page(2, 1))
	if err != nil || len(byClass.Items) != 1 || !cmp.Equal(want, byClass.Items[0]) {
		t.Errorf("ClassEnrollments(11), page 2 of size 1: %+v, %v; want %+v", byClass.Items, err, want)
	}
	byStudent, err := q.StudentEnrollments(ctx, 40, page(1, 1))
	if err != nil || len(byStudent.Items) != 1 || !cmp.Equal(want, byStudent.Items[0]) {
		t.Errorf("StudentEnrollments(40), page 1 of size 1: %+v, %v; want %+v", byStudent.Items, err, want)
	}
}

// A user's promotion requests (a personal export) are theirs only, by id
// whatever order they were written in, each in full with the organisations
// its organisation name matches (ignoring case and surrounding spaces).
func TestPromotionRequestsOfUser(t *testing.T) {
	pool := pgtest.Fresh(t)
	q := queries.New(pool)
	ctx := context.Background()
	matchingOrganizations(t, pool)
	for _, r := range []struct {
		id, user int64
		orgName  string
	}{{7, 41, "riverside school"}, {4, 42, "Hilltop"}, {3, 41, "Hilltop"}, {5, 41, "Nowhere"}} {
		fixture(t, pool, `INSERT INTO promotion_requests (id, user_id, name, email, org_name, target_role, status, requested_at, updated_at, version)
			VALUES ($1, $2, 'Someone', 'someone@example.com', $3, 'partner', 'pending', $4, $4, 1)`,
			r.id, r.user, r.orgName, t0.Add(time.Duration(r.id)*time.Hour))
	}
	fixture(t, pool, `UPDATE promotion_requests SET status = 'approved', reviewed_by = 7, reviewed_at = $1, org_id = 11, partner_id = 60,
		edu_category = 'school', version = 2 WHERE id = 3`, t0.Add(10*time.Hour))
	fixture(t, pool, `UPDATE promotion_requests SET status = 'rejected', reviewed_by = 8, reviewed_at = $1, reason = 'Unknown school',
		target_role = 'assistant', version = 2 WHERE id = 5`, t0.Add(11*time.Hour))

	got, err := q.PromotionRequestsOfUser(ctx, 41)
	if err != nil {
		t.Fatal(err)
	}
	want := []queries.PromotionRequest{
		{ID: 3, UserID: 41, Name: "Someone", Email: "someone@example.com", OrgName: "Hilltop", TargetRole: "partner",
			EduCategory: new("school"), Status: "approved", ReviewedBy: new(int64(7)), ReviewedAt: new(t0.Add(10 * time.Hour)),
			OrgID: new(int64(11)), PartnerID: new(int64(60)), RequestedAt: t0.Add(3 * time.Hour),
			Matching: []queries.OrganizationRef{{ID: 11, Name: "Hilltop"}}},
		{ID: 5, UserID: 41, Name: "Someone", Email: "someone@example.com", OrgName: "Nowhere", TargetRole: "assistant",
			Status: "rejected", Reason: new("Unknown school"), ReviewedBy: new(int64(8)), ReviewedAt: new(t0.Add(11 * time.Hour)),
			RequestedAt: t0.Add(5 * time.Hour), Matching: []queries.OrganizationRef{}},
		{ID: 7, UserID: 41, Name: "Someone", Email: "someone@example.com", OrgName: "riverside school", TargetRole: "partner",
			Status: "pending", RequestedAt: t0.Add(7 * time.Hour),
			Matching: []queries.OrganizationRef{{ID: 10, Name: "Riverside School"}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PromotionRequestsOfUser(41) (-want +got):\n%s", diff)
	}
	for _, r := range got {
		if r.Matching == nil {
			t.Errorf("request %d: Matching is nil, want a list (even empty)", r.ID)
		}
	}
	requestID := func(r queries.PromotionRequest) int64 { return r.ID }
	if got, err := q.PromotionRequestsOfUser(ctx, 42); err != nil || !cmp.Equal([]int64{4}, ids(got, requestID)) {
		t.Errorf("PromotionRequestsOfUser(42) = %v, %v; want [4]", ids(got, requestID), err)
	}
	if got, err := q.PromotionRequestsOfUser(ctx, 99); err != nil || len(got) != 0 {
		t.Errorf("PromotionRequestsOfUser(99), a user without requests = %+v, %v; want none", got, err)
	}
}

// fakeEmbedder embeds each query it knows as the vector it is given, and
// fails on any other, as the embeddings service can.
type fakeEmbedder map[string][]float32

func (f fakeEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, text := range texts {
		v, ok := f[text]
		if !ok {
			return nil, fmt.Errorf("embeddings service: no vector for %q", text)
		}
		out[i] = v
	}
	return out, nil
}

// chunk is a knowledge_chunks fixture row.
type chunk struct {
	id, knowledge int64
	ord           int
	vector        []float32
	text          string
}

func insertChunks(t *testing.T, pool *pgxpool.Pool, chunks ...chunk) {
	t.Helper()
	for _, c := range chunks {
		fixture(t, pool, `INSERT INTO knowledge_chunks (id, knowledge_id, ord, text, embedding) VALUES ($1, $2, $3, $4, $5)`,
			c.id, c.knowledge, c.ord, c.text, c.vector)
	}
}

// searchFixtures are the documents TestKnowledgeSearch and
// TestKnowledgePassages search. The query "apple pie" embeds as (1, 0), so a
// chunk's score is the cosine of its vector's angle to the x axis.
//
// Document 1 (owner 1): top_k 5, min_score 0.5, no reranker. Its chunks
// score 1 (10), 0.949 (16), 0.707 (12 and 13, a tie: 13 comes first by
// ord), 0.316 (14, under min_score), 0 (11) and -1 (15), written out of
// order.
//
// Document 2 (owner 1): top_k 4, min_score 0, the reranker keeping 2. By
// score its chunks are 20, 21, 22, 23 (then 25, cut by top_k, and 24,
// scoring 0); by their words' relevance to the query, 21 then 22.
//
// Document 3 is owner 2's; 4 (owner 1) has settings but no chunks yet; 5
// (owner 1) has no settings; 6 (owner 1) has a min_score that is not a
// number.
func searchFixtures(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	for _, d := range []struct{ id, owner int64 }{{1, 1}, {2, 1}, {3, 2}, {4, 1}, {5, 1}, {6, 1}} {
		fixture(t, pool, `INSERT INTO knowledge_documents (id, user_id, title, content_type, size, created_at, updated_at, version)
			VALUES ($1, $2, 'doc', 'text/plain', 10, $3, $3, 1)`, d.id, d.owner, t0)
	}
	fixture(t, pool, `INSERT INTO knowledge_settings (knowledge_id, top_k, min_score, score_type, reranker_enabled, reranker_model, reranker_top_n, created_at, updated_at, version)
		VALUES (1, 5, '0.5', 'cosine', false, NULL, 5, $1, $1, 1),
		       (2, 4, '0', 'cosine', true, 'lexical', 2, $1, $1, 1),
		       (3, 5, '0', 'cosine', false, NULL, 5, $1, $1, 1),
		       (4, 5, '0', 'cosine', false, NULL, 5, $1, $1, 1),
		       (6, 5, 'high', 'cosine', false, NULL, 5, $1, $1, 1)`, t0)
	insertChunks(t, pool,
		chunk{16, 1, 6, []float32{3, 1}, "sixteen"},
		chunk{10, 1, 0, []float32{1, 0}, "ten"},
		chunk{12, 1, 3, []float32{1, 1}, "twelve"},
		chunk{13, 1, 2, []float32{1, 1}, "thirteen"},
		chunk{11, 1, 1, []float32{0, 1}, "eleven"},
		chunk{14, 1, 4, []float32{1, 3}, "fourteen"},
		chunk{15, 1, 5, []float32{-1, 0}, "fifteen"},
		chunk{23, 2, 3, []float32{1, 2}, "carrot cake"},
		chunk{20, 2, 0, []float32{1, 0}, "banana bread recipe"},
		chunk{25, 2, 5, []float32{1, 3}, "apple"},
		chunk{22, 2, 2, []float32{1, 1}, "pie crust"},
		chunk{21, 2, 1, []float32{2, 1}, "apple pie with apple slices"},
		chunk{24, 2, 4, []float32{0, 1}, "apple pie apple pie"},
		chunk{30, 3, 0, []float32{1, 0}, "owner two's"},
		chunk{60, 6, 0, []float32{1, 0}, "six"},
	)
}

var searchQueries = fakeEmbedder{"apple pie": {1, 0}}

// Scores are float64 cosines of float32 vectors: equal to a few ulps.
var approx = cmpopts.EquateApprox(0, 1e-9)

// The lengths of the fixtures' vectors, whose cosines the scores are.
var r2, r5, r10 = math.Sqrt(2), math.Sqrt(5), math.Sqrt(10)

// A search of one document follows its settings: cosine similarity, best
// first (ties by chunk id), nothing below min_score or scoring 0 or less,
// top_k of them, then the reranker's order and its top_n; ranks count from
// 1. Only the owner searches a document; a document without settings is not
// found, one without chunks finds nothing. A reindexed document (new chunk
// ids) is searched in its new chunks, and a change of settings applies at
// once.
func TestKnowledgeSearch(t *testing.T) {
	pool := pgtest.Fresh(t)
	reads := queries.New(pool)
	ctx := context.Background()
	searchFixtures(t, pool)
	k, err := queries.NewKnowledgeSearch(reads, searchQueries)
	if err != nil {
		t.Fatal(err)
	}
	search := func(caller, id int64) []queries.SearchHit {
		t.Helper()
		hits, err := k.Search(ctx, caller, id, "apple pie")
		if err != nil {
			t.Fatalf("Search(%d, %d): %v", caller, id, err)
		}
		return hits
	}
	want := []queries.SearchHit{
		{KnowledgeID: 1, ChunkID: 10, Text: "ten", Score: 1, Rank: 1},
		{KnowledgeID: 1, ChunkID: 16, Text: "sixteen", Score: 3 / r10, Rank: 2},
		{KnowledgeID: 1, ChunkID: 12, Text: "twelve", Score: 1 / r2, Rank: 3},
		{KnowledgeID: 1, ChunkID: 13, Text: "thirteen", Score: 1 / r2, Rank: 4},
	}
	if diff := cmp.Diff(want, search(1, 1), approx); diff != "" {
		t.Errorf("Search(1, 1), no reranker (-want +got):\n%s", diff)
	}
	reranked := []queries.SearchHit{
		{KnowledgeID: 2, ChunkID: 21, Text: "apple pie with apple slices", Score: 2 / r5, Rank: 1},
		{KnowledgeID: 2, ChunkID: 22, Text: "pie crust", Score: 1 / r2, Rank: 2},
	}
	if diff := cmp.Diff(reranked, search(1, 2), approx); diff != "" {
		t.Errorf("Search(1, 2), reranked (-want +got):\n%s", diff)
	}
	if hits := search(1, 4); len(hits) != 0 {
		t.Errorf("Search(1, 4), a document without chunks: %+v, want none", hits)
	}
	if hits := search(2, 3); len(hits) != 1 || hits[0].ChunkID != 30 {
		t.Errorf("Search(2, 3), by its owner: %+v, want chunk 30", hits)
	}
	for _, c := range []struct {
		what       string
		caller, id int64
	}{{"another user's document", 1, 3}, {"a document without settings", 1, 5}, {"no document", 1, 99}} {
		hits, err := k.Search(ctx, c.caller, c.id, "apple pie")
		wantNotFound(t, c.what, err)
		if hits != nil {
			t.Errorf("%s: hits %+v", c.what, hits)
		}
	}
	if _, err := k.Search(ctx, 1, 6, "apple pie"); err == nil {
		t.Error("Search(1, 6), min_score 'high': no error")
	}
	if _, err := k.Search(ctx, 1, 1, "no vector"); !errors.Is(err, derrors.ErrBadGateway) {
		t.Errorf("Search with the embeddings service failing: %v, want bad gateway", err)
	}

	// Reindexed: document 1's chunks replaced by new ones, in one transaction.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `DELETE FROM knowledge_chunks WHERE knowledge_id = 1`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []chunk{{41, 1, 0, []float32{1, 1}, "forty-one"}, {40, 1, 1, []float32{1, 0}, "forty"}, {42, 1, 2, []float32{0, 1}, "forty-two"}} {
		if _, err := tx.Exec(ctx, `INSERT INTO knowledge_chunks (id, knowledge_id, ord, text, embedding) VALUES ($1, $2, $3, $4, $5)`,
			c.id, c.knowledge, c.ord, c.text, c.vector); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	reindexed := []queries.SearchHit{
		{KnowledgeID: 1, ChunkID: 40, Text: "forty", Score: 1, Rank: 1},
		{KnowledgeID: 1, ChunkID: 41, Text: "forty-one", Score: 1 / r2, Rank: 2},
	}
	if diff := cmp.Diff(reindexed, search(1, 1), approx); diff != "" {
		t.Errorf("Search(1, 1), reindexed (-want +got):\n%s", diff)
	}

	fixture(t, pool, `UPDATE knowledge_settings SET top_k = 1, version = 2 WHERE knowledge_id = 1`)
	if diff := cmp.Diff(reindexed[:1], search(1, 1), approx); diff != "" {
		t.Errorf("Search(1, 1), top_k 1 (-want +got):\n%s", diff)
	}
}

// Passages search each of the caller's documents in the order asked, each
// with its own settings, and rank the hits across them all; a document the
// caller may not search fails the whole call.
func TestKnowledgePassages(t *testing.T) {
	pool := pgtest.Fresh(t)
	reads := queries.New(pool)
	ctx := context.Background()
	searchFixtures(t, pool)
	k, err := queries.NewKnowledgeSearch(reads, searchQueries)
	if err != nil {
		t.Fatal(err)
	}
	got, err := k.Passages(ctx, 1, []int64{2, 4, 1}, "apple pie")
	want := []queries.SearchHit{
		{KnowledgeID: 2, ChunkID: 21, Text: "apple pie with apple slices", Score: 2 / r5, Rank: 1},
		{KnowledgeID: 2, ChunkID: 22, Text: "pie crust", Score: 1 / r2, Rank: 2},
		{KnowledgeID: 1, ChunkID: 10, Text: "ten", Score: 1, Rank: 3},
		{KnowledgeID: 1, ChunkID: 16, Text: "sixteen", Score: 3 / r10, Rank: 4},
		{KnowledgeID: 1, ChunkID: 12, Text: "twelve", Score: 1 / r2, Rank: 5},
		{KnowledgeID: 1, ChunkID: 13, Text: "thirteen", Score: 1 / r2, Rank: 6},
	}
	if diff := cmp.Diff(want, got, approx); err != nil || diff != "" {
		t.Errorf("Passages(1, [2 4 1]): %v (-want +got):\n%s", err, diff)
	}
	got, err = k.Passages(ctx, 1, []int64{1, 2}, "apple pie")
	if err != nil || !cmp.Equal([]int64{10, 16, 12, 13, 21, 22}, ids(got, func(h queries.SearchHit) int64 { return h.ChunkID })) {
		t.Errorf("Passages(1, [1 2]) = %+v, %v; want chunks 10, 16, 12, 13, 21, 22", got, err)
	}
	for i, h := range got {
		if h.Rank != i+1 {
			t.Errorf("Passages(1, [1 2]): hit %d (chunk %d) has rank %d", i, h.ChunkID, h.Rank)
		}
	}
	if got, err := k.Passages(ctx, 1, nil, "apple pie"); err != nil || len(got) != 0 {
		t.Errorf("Passages of no documents = %+v, %v; want none", got, err)
	}
	got, err = k.Passages(ctx, 1, []int64{1, 3}, "apple pie") // 3 is owner 2's
	wantNotFound(t, "Passages with another user's document", err)
	if got != nil {
		t.Errorf("Passages with another user's document: %+v, want no hits", got)
	}
}

// A reindex that commits between a search's read of the vectors and its
// read of the hits' texts replaces every chunk (new ids): the search runs
// again on the new chunks, and never answers a passage without its text.
// One that keeps replacing them leaves such hits out.
func TestKnowledgeSearchDuringAReindex(t *testing.T) {
	pool := pgtest.Fresh(t)
	ctx := context.Background()
	searchFixtures(t, pool)
	k, err := queries.NewKnowledgeSearch(queries.New(pool), searchQueries)
	if err != nil {
		t.Fatal(err)
	}
	reindexes := 0
	reindex := func() {
		// Indexing's one transaction: every chunk of document 1 under a new id.
		reindexes++
		fixture(t, pool, `UPDATE knowledge_chunks SET id = id + 100 WHERE knowledge_id = 1`)
	}
	queries.BetweenReads(k, func() {
		if reindexes == 0 {
			reindex()
		}
	})
	hits, err := k.Search(ctx, 1, 1, "apple pie")
	if err != nil {
		t.Fatal(err)
	}
	want := []queries.SearchHit{
		{KnowledgeID: 1, ChunkID: 110, Text: "ten", Score: 1, Rank: 1},
		{KnowledgeID: 1, ChunkID: 116, Text: "sixteen", Score: 3 / r10, Rank: 2},
		{KnowledgeID: 1, ChunkID: 112, Text: "twelve", Score: 1 / r2, Rank: 3},
		{KnowledgeID: 1, ChunkID: 113, Text: "thirteen", Score: 1 / r2, Rank: 4},
	}
	if diff := cmp.Diff(want, hits, approx); diff != "" {
		t.Errorf("a search across a reindex (-want +got):\n%s", diff)
	}

	queries.BetweenReads(k, reindex) // a reindex before each read of the texts
	hits, err = k.Search(ctx, 1, 1, "apple pie")
	if err != nil || len(hits) != 0 {
		t.Errorf("a search across two reindexes: %+v, %v; want no hits rather than hits without their text", hits, err)
	}
}
