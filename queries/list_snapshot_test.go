package queries_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/pgtest"
	"lectern/queries"
)

// afterEachStatement is a pgx tracer that calls then (when set) after each
// statement of its pool has ended, its rows read and closed: a projection
// committing between two statements of one read, every time.
type afterEachStatement struct {
	mu   sync.Mutex
	then func()
}

func (h *afterEachStatement) set(then func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.then = then
}

func (h *afterEachStatement) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (h *afterEachStatement) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {
	h.mu.Lock()
	then := h.then
	h.mu.Unlock()
	if then != nil {
		then()
	}
}

// shape is what a page says of itself: its total and how many items it shows.
func shape[T any](l queries.List[T], err error) (total, items int, _ error) {
	return l.Total, len(l.Items), err
}

// consistent reports whether a page of n items could be page p of a list of
// total items: at most a page's size; a full page within the total; a page
// that is not full the last, ending at the total; an empty page at or past
// the end.
func consistent(total, n int, p queries.Page) bool {
	switch off := p.Offset(); {
	case n > p.Size:
		return false
	case n == p.Size:
		return total >= off+n
	case n > 0:
		return total == off+n
	default:
		return total <= off
	}
}

// Every paginated list reads its total and its items from one snapshot:
// while a list is read, a row of it commits after each statement the read
// issues (as a projection might, between any two), and the page must still
// agree with its total. Read as a count and then the page, in two
// statements, a list of 3 read as "total 3" with 4 items, or an empty page
// 2 of size 3 as "total 4".
func TestListsReadTotalAndItemsInOneSnapshot(t *testing.T) {
	pool := pgtest.Fresh(t)
	ctx := context.Background()
	hook := &afterEachStatement{}
	cfg := pool.Config()
	cfg.ConnConfig.Tracer = hook
	reader, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	q := queries.New(reader)

	// Each list's rows are those of key 1 (owner, organisation, class,
	// student; none for organisations); add inserts one, $1 its id.
	lists := []struct {
		name, table, add string
		read             func(queries.Page) (int, int, error)
	}{
		{"Agents", "agents", `INSERT INTO agents (id, owner_id, name, system_prompt, is_active, created_at, updated_at, version)
			VALUES ($1, 1, 'a', 'p', true, now(), now(), 1)`,
			func(p queries.Page) (int, int, error) { return shape(q.Agents(ctx, 1, p)) }},
		{"Courses", "courses", `INSERT INTO courses (id, org_id, partner_id, title, course_key, status, created_by, created_at, updated_at, version)
			VALUES ($1, 1, 5, 'course', 'KEY-' || $1::bigint, 'active', 7, now(), now(), 1)`,
			func(p queries.Page) (int, int, error) { return shape(q.Courses(ctx, 1, p)) }},
		{"Classes", "classes", `INSERT INTO classes (id, org_id, partner_id, name, status, invite_only, allowed_model_ids, created_by, created_at, updated_at, version)
			VALUES ($1, 1, 5, 'class', 'active', false, '{}', 7, now(), now(), 1)`,
			func(p queries.Page) (int, int, error) { return shape(q.Classes(ctx, 1, p)) }},
		{"ClassEnrollments", "enrollments", `INSERT INTO enrollments (id, class_id, org_id, partner_id, student_id, status, enrolled_at, source, enrolled_by, created_at, updated_at, version)
			VALUES ($1, 1, 1, 5, $1, 'active', now(), 'partner', 7, now(), now(), 1)`,
			func(p queries.Page) (int, int, error) { return shape(q.ClassEnrollments(ctx, 1, p)) }},
		{"StudentEnrollments", "enrollments", `INSERT INTO enrollments (id, class_id, org_id, partner_id, student_id, status, enrolled_at, source, enrolled_by, created_at, updated_at, version)
			VALUES ($1, $1, 1, 5, 1, 'active', now(), 'partner', 7, now(), now(), 1)`,
			func(p queries.Page) (int, int, error) { return shape(q.StudentEnrollments(ctx, 1, p)) }},
		{"ListFewShotExamples", "few_shot_examples", `INSERT INTO few_shot_examples (id, user_id, title, input_text, output_text, meta, is_active, created_at, updated_at, version)
			VALUES ($1, 1, NULL, 'in', 'out', '{}', true, now(), now(), 1)`,
			func(p queries.Page) (int, int, error) { return shape(q.ListFewShotExamples(ctx, 1, nil, p)) }},
		{"KnowledgeDocuments", "knowledge_documents", `INSERT INTO knowledge_documents (id, user_id, title, content_type, size, created_at, updated_at, version)
			VALUES ($1, 1, 'doc', 'text/plain', 10, now(), now(), 1)`,
			func(p queries.Page) (int, int, error) { return shape(q.KnowledgeDocuments(ctx, 1, p)) }},
		{"Organisations", "organizations", `INSERT INTO organizations (id, name, created_by, created_at, updated_at, version)
			VALUES ($1, 'Org ' || $1::bigint, 7, now(), now(), 1)`,
			func(p queries.Page) (int, int, error) { return shape(q.Organisations(ctx, p)) }},
		{"PromotionRequests", "promotion_requests", `INSERT INTO promotion_requests (id, user_id, name, email, org_name, target_role, status, requested_at, updated_at, version)
			VALUES ($1, $1, 'Someone', 'someone@example.com', 'Nowhere', 'partner', 'pending', now(), now(), 1)`,
			func(p queries.Page) (int, int, error) { return shape(q.PromotionRequests(ctx, "", p)) }},
		// A session and its count, in one transaction, as the projection writes them.
		{"Sessions", "practice_sessions, practice_session_counts", `WITH s AS (
				INSERT INTO practice_sessions (id, user_id, knowledge_ids, created_at, updated_at, version)
				VALUES ($1, 1, '{}', now(), now(), 1) RETURNING user_id)
			INSERT INTO practice_session_counts (user_id, total) SELECT user_id, 1 FROM s
			ON CONFLICT (user_id) DO UPDATE SET total = practice_session_counts.total + 1`,
			func(p queries.Page) (int, int, error) { return shape(q.Sessions(ctx, 1, p)) }},
	}
	for _, l := range lists {
		for _, c := range []struct {
			rows int
			p    queries.Page
		}{
			{0, page(1, 50)}, // an empty list
			{3, page(1, 50)}, // one page, not full
			{3, page(2, 2)},  // the last page, not full
			{3, page(2, 3)},  // past the end
		} {
			fixture(t, pool, `TRUNCATE `+l.table)
			var id int64
			add := func() error {
				id++
				_, err := pool.Exec(ctx, l.add, id)
				return err
			}
			for range c.rows {
				if err := add(); err != nil {
					t.Fatalf("%s: %v", l.name, err)
				}
			}
			var addErr error
			hook.set(func() {
				if err := add(); err != nil && addErr == nil {
					addErr = err
				}
			})
			total, n, err := l.read(c.p)
			hook.set(nil)
			if err != nil || addErr != nil {
				t.Fatalf("%s, %d rows, page %+v: %v; adding a row: %v", l.name, c.rows, c.p, err, addErr)
			}
			added := int(id) - c.rows
			if added == 0 {
				t.Fatalf("%s: the read issued no statement", l.name)
			}
			if !consistent(total, n, c.p) || total < c.rows || total > c.rows+added {
				t.Errorf("%s, %d rows and %d added while reading, page %+v: total %d with %d items",
					l.name, c.rows, added, c.p, total, n)
			}
		}
	}
}
