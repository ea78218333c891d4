package queries

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"
)

// PracticeClass is what a practice turn needs to know of a class, and of the
// caller's standing in it.
type PracticeClass struct {
	ID              int64
	OrgID           int64
	PartnerID       int64
	PrimaryModelID  *int64
	AllowedModelIDs []int64
	// Enrolled: the caller has an active enrollment in the class.
	Enrolled bool
	// OrgPartner: the caller is an active partner of the class's organisation.
	OrgPartner bool
	// Ended: the class's status is ended.
	Ended bool
}

// PracticeClass reads a class (of any organisation) and the caller's standing
// in it, in one round trip; a missing class is not found.
func (q *DB) PracticeClass(ctx context.Context, caller, classID int64) (PracticeClass, error) {
	var c PracticeClass
	err := q.pool.QueryRow(ctx, `
		SELECT c.id, c.org_id, c.partner_id, c.primary_model_id, c.allowed_model_ids,
			EXISTS (SELECT 1 FROM enrollments e WHERE e.student_id = $2 AND e.class_id = c.id AND e.status = 'active'),
			EXISTS (SELECT 1 FROM partners p WHERE p.user_id = $2 AND p.org_id = c.org_id AND p.is_active),
			c.status = 'ended'
		FROM classes c WHERE c.id = $1`, classID, caller).
		Scan(&c.ID, &c.OrgID, &c.PartnerID, &c.PrimaryModelID, &c.AllowedModelIDs, &c.Enrolled, &c.OrgPartner, &c.Ended)
	if c.AllowedModelIDs == nil {
		c.AllowedModelIDs = []int64{}
	}
	return c, notFound(err, "Class")
}

// PracticeSession is the practice_sessions read model row.
type PracticeSession struct {
	ID           int64
	UserID       int64
	ClassID      *int64
	ProjectID    *int64
	AgentID      *int64
	KnowledgeIDs []int64
	Title        *string
	Notes        *string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// SessionSettings is the session_settings read model row with its few-shot links.
type SessionSettings struct {
	SettingID        int64
	SessionID        int64
	StylePreset      string
	StyleParams      json.RawMessage
	GenerationParams json.RawMessage
	AgentSnapshot    json.RawMessage
	CreatedAt        time.Time
	UpdatedAt        time.Time
	FewShotLinks     []SessionFewShotLink
}

// SessionFewShotLink is a session_few_shot_links row with its example; the
// example is nil when its read model has not caught up.
type SessionFewShotLink struct {
	ID        int64
	SettingID int64
	ExampleID int64
	SortOrder int
	CreatedAt time.Time
	Example   *FewShotExample
}

// SessionResponse is a session_responses row: one model's answer in a turn.
type SessionResponse struct {
	ID               int64
	SessionID        int64
	SessionModelID   int64
	Turn             int
	ModelName        string
	PromptText       string
	ResponseText     string
	TokenUsage       json.RawMessage
	LatencyMS        int64
	IsPrimary        bool
	GenerationParams json.RawMessage
	// Error is nil when the model answered.
	Error     json.RawMessage
	CreatedAt time.Time
}

// SessionDetail is a session with its settings and every response.
type SessionDetail struct {
	PracticeSession
	Settings  SessionSettings
	Responses []SessionResponse
}

// SessionsPageSQL reads one page of a user's sessions ($1 the user, $2 the
// page size, $3 the offset), each row with the user's total. Exported for
// the bench's baselines, which must issue exactly this.
const SessionsPageSQL = `
	SELECT ` + sessionsTotal + `, ` + sessionColumns + sessionsPage

// sessionsPageOrTotalSQL is SessionsPageSQL that brings back a row even for
// an empty page: the total, every session column NULL. For an empty page
// only, where SessionsPageSQL brings back no row and so no total.
const sessionsPageOrTotalSQL = `
	SELECT c.total, p.*
	FROM (SELECT ` + sessionsTotal + `) AS c (total)
	LEFT JOIN (SELECT ` + sessionColumns + sessionsPage + `) AS p ON true
	ORDER BY p.id DESC`

// sessionsTotal is the user's ($1) number of sessions; sessionsPage, the
// FROM and the rest of a page of them ($2 the page size, $3 the offset),
// newest first.
const (
	sessionsTotal = `COALESCE((SELECT total FROM practice_session_counts WHERE user_id = $1), 0)`
	sessionsPage  = `
	FROM practice_sessions
	WHERE user_id = $1
	  AND id <= (SELECT id FROM practice_sessions WHERE user_id = $1 ORDER BY id DESC LIMIT 1 OFFSET $3)
	ORDER BY id DESC
	LIMIT $2`
)

const sessionColumns = `id, user_id, class_id, project_id, agent_id, knowledge_ids, title, notes, created_at, updated_at`

func scanSession(row pgx.Row) (PracticeSession, error) {
	var s PracticeSession
	err := row.Scan(&s.ID, &s.UserID, &s.ClassID, &s.ProjectID, &s.AgentID, &s.KnowledgeIDs, &s.Title, &s.Notes,
		&s.CreatedAt, &s.UpdatedAt)
	if s.KnowledgeIDs == nil {
		s.KnowledgeIDs = []int64{}
	}
	return s, err
}

// Sessions lists owner's sessions, newest first, without their settings and
// responses. The total is kept per user by the projection, so the page never
// counts rows.
//
// The page is one backward range scan of the (user_id, id) primary key,
// bounded above by the id at the page's offset: that id is found in the key
// alone (an index-only scan, so a deep page skips index entries, not rows),
// and the page then reads its own rows only. There is no join for the
// planner to cost: the former self-join of the page's ids with the table was
// planned as a hash join over a sequential scan of every session of the user
// (1.5 ms at 10 000 sessions, against 0.1 ms for this). Every row carries the
// total, read in the same statement and so from the same snapshot as the
// page (the projection writes a session and its count in one transaction).
// An empty page (no sessions, or past the end) brings back no row, and so no
// total: the page is then read again, whole, by sessionsPageOrTotalSQL,
// whose answer is the list's (a total counted by a statement of its own
// could count sessions committed since the empty page was read, and the
// page would claim items it does not show).
func (q *DB) Sessions(ctx context.Context, owner int64, p Page) (List[PracticeSession], error) {
	out := List[PracticeSession]{Items: make([]PracticeSession, 0, p.Size), Page: p}
	if err := q.readSessions(ctx, &out, SessionsPageSQL, owner); err != nil || len(out.Items) > 0 {
		return out, err
	}
	return out, q.readSessions(ctx, &out, sessionsPageOrTotalSQL, owner)
}

// readSessions reads the page of out with sql (SessionsPageSQL or
// sessionsPageOrTotalSQL) into out.
func (q *DB) readSessions(ctx context.Context, out *List[PracticeSession], sql string, owner int64) error {
	rows, err := q.pool.Query(ctx, sql, owner, out.Page.Size, out.Page.Offset())
	if err != nil {
		return err
	}
	return readRows(rows, out, scanSession)
}

// Session reads one of owner's sessions with its settings, few-shot links and
// every response of every turn, in order; another user's session is not
// found. One round trip.
func (q *DB) Session(ctx context.Context, owner, id int64) (SessionDetail, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT `+sessionColumns+` FROM practice_sessions WHERE id = $1 AND user_id = $2`, id, owner)
	b.Queue(`
		SELECT st.id, st.session_id, st.style_preset, st.style_params, st.generation_params, st.agent_snapshot,
			st.created_at, st.updated_at
		FROM session_settings st JOIN practice_sessions s ON s.id = st.session_id
		WHERE st.session_id = $1 AND s.user_id = $2`, id, owner)
	b.Queue(`
		SELECT l.id, l.setting_id, l.example_id, l.sort_order, l.created_at,
			f.id, f.user_id, f.title, f.input_text, f.output_text, f.meta, f.is_active, f.created_at, f.updated_at
		FROM session_few_shot_links l
		JOIN practice_sessions s ON s.id = l.session_id
		LEFT JOIN few_shot_examples f ON f.id = l.example_id AND f.user_id = s.user_id
		WHERE l.session_id = $1 AND s.user_id = $2
		ORDER BY l.sort_order, l.id`, id, owner)
	b.Queue(`
		SELECT r.id, r.session_id, r.session_model_id, r.turn, r.model_name, r.prompt_text, r.response_text, r.token_usage,
			r.latency_ms, r.is_primary, r.generation_params, r.error, r.created_at
		FROM session_responses r JOIN practice_sessions s ON s.id = r.session_id
		WHERE r.session_id = $1 AND s.user_id = $2
		ORDER BY r.turn, r.position`, id, owner)
	br := q.pool.SendBatch(ctx, b)
	defer func() { _ = br.Close() }()

	var out SessionDetail
	var err error
	if out.PracticeSession, err = scanSession(br.QueryRow()); err != nil {
		return out, notFound(err, "Session")
	}
	st := &out.Settings
	if err := br.QueryRow().Scan(&st.SettingID, &st.SessionID, &st.StylePreset, &st.StyleParams, &st.GenerationParams,
		&st.AgentSnapshot, &st.CreatedAt, &st.UpdatedAt); err != nil {
		return out, notFound(err, "Session")
	}
	rows, err := br.Query()
	if err != nil {
		return out, err
	}
	st.FewShotLinks, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (SessionFewShotLink, error) {
		var l SessionFewShotLink
		var x FewShotExample
		var exampleID, userID *int64
		var inputText, outputText *string
		var active *bool
		var created, updated *time.Time
		err := r.Scan(&l.ID, &l.SettingID, &l.ExampleID, &l.SortOrder, &l.CreatedAt,
			&exampleID, &userID, &x.Title, &inputText, &outputText, &x.Meta, &active, &created, &updated)
		if err == nil && exampleID != nil {
			x.ID, x.UserID, x.InputText, x.OutputText, x.IsActive = *exampleID, *userID, *inputText, *outputText, *active
			x.CreatedAt, x.UpdatedAt = *created, *updated
			l.Example = &x
		}
		return l, err
	})
	if err != nil {
		return out, err
	}
	if st.FewShotLinks == nil {
		st.FewShotLinks = []SessionFewShotLink{}
	}
	rows, err = br.Query()
	if err != nil {
		return out, err
	}
	out.Responses, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (SessionResponse, error) {
		var x SessionResponse
		err := r.Scan(&x.ID, &x.SessionID, &x.SessionModelID, &x.Turn, &x.ModelName, &x.PromptText, &x.ResponseText,
			&x.TokenUsage, &x.LatencyMS, &x.IsPrimary, &x.GenerationParams, &x.Error, &x.CreatedAt)
		return x, err
	})
	if out.Responses == nil {
		out.Responses = []SessionResponse{}
	}
	return out, err
}
