package api

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"lectern/api/validation"
	"lectern/commands"
	"lectern/derrors"
	"lectern/events"
	"lectern/projections"
	"lectern/queries"
)

// Personal data: erasure (GDPR art. 17) and export (art. 20). docs/privacy.md.

var (
	eraseMeBody = validation.Schema{Fields: []validation.Field{reqString("password", 128)}}
	userPath    = []validation.Field{idParam("user_id")}

	// erasedReadModels are the read models that anonymise an erased user.
	erasedReadModels = []string{projections.AccountsProjection, projections.PracticeProjection, projections.KnowledgeProjection}
)

func (s *Server) privacyOperations() []operation {
	return []operation{
		{method: http.MethodGet, path: "/user/me/export", id: "export_my_data", tag: "privacy", auth: true,
			summary: "Everything Lectern holds of the caller, as JSON", status: 200, response: "PersonalExport",
			errors: []int{401}, handle: s.exportMe},
		{method: http.MethodDelete, path: "/user/me", id: "erase_me", tag: "privacy", auth: true,
			summary: "Erase my account and personal data (the password confirms it)", body: &eraseMeBody, status: 204,
			errors: []int{401, 403, 429}, handle: s.eraseMe},
		{method: http.MethodPost, path: "/admin/users/{user_id}/erase", id: "erase_user", tag: "privacy", auth: true,
			summary: "Erase a user's account and personal data (admin)", pathParams: userPath, status: 204,
			errors: []int{401, 403, 404}, handle: s.eraseUser},
		{method: http.MethodPost, path: "/admin/partners/{partner_id}/erase", id: "erase_partner", tag: "privacy", auth: true,
			summary: "Erase the personal data of a partner without a user account (admin)", pathParams: partnerPath, status: 204,
			errors: []int{401, 403, 404, 409}, handle: s.erasePartner},
	}
}

func privacyComponents() schema {
	return schema{
		"PersonalExport": object(schema{
			"exported_at":         dateTime(),
			"user":                ref("Me"),
			"agents":              arrayOf(ref("Agent")),
			"few_shot_examples":   arrayOf(ref("FewShotExample")),
			"practice_sessions":   arrayOf(ref("PracticeSession")),
			"knowledge_documents": arrayOf(ref("PersonalDocument")),
			"enrollments":         arrayOf(ref("Enrollment")),
			"partner_records":     arrayOf(ref("Partner")),
			"promotion_requests":  arrayOf(ref("PromotionRequest")),
			"sent_messages":       arrayOf(ref("SentMessages")),
			"rate_limit_records":  arrayOf(ref("RateLimitRecord")),
		}, "exported_at", "user", "agents", "few_shot_examples", "practice_sessions", "knowledge_documents",
			"enrollments", "partner_records", "promotion_requests", "sent_messages", "rate_limit_records"),
		"PersonalDocument": object(schema{"document": ref("KnowledgeDocument"), "text": str()}, "document", "text"),
		// What each turn sent its models: the agent's system prompt, the
		// few-shot examples, the knowledge passages and the history, as sent.
		"SentMessages": object(schema{"session_id": integer(), "turn": integer(),
			"messages": arrayOf(object(schema{"role": str(), "content": str()}, "role", "content"))},
			"session_id", "turn", "messages"),
		// A rate limit's record of the caller's attempts (kept for its window).
		"RateLimitRecord": object(schema{"kind": str(), "client_address": nullable(str()), "times": arrayOf(dateTime())},
			"kind", "client_address", "times"),
	}
}

var errWrongPassword = derrors.New(derrors.ErrForbidden, "The password is not correct")

func (s *Server) eraseMe(w http.ResponseWriter, r *http.Request, in input) error {
	u, err := s.deps.Queries.UserByID(r.Context(), in.user.UserID)
	if isNotFound(err) {
		return errBadCredentials
	}
	if err != nil {
		return err
	}
	// The password confirms it is the person, not a stolen token; checked
	// as a login is, under the login's rate limits.
	password, _ := in.body.String("password")
	if _, err := s.deps.Commands.Identity.Login(r.Context(), u.Email, password, s.clientAddr(r)); err != nil {
		if errors.Is(err, derrors.ErrUnauthenticated) {
			return errWrongPassword
		}
		return err
	}
	return s.erase(w, r, u.ID, u.ID)
}

func (s *Server) eraseUser(w http.ResponseWriter, r *http.Request, in input) error {
	if err := requireAdmin(in.user); err != nil {
		return err
	}
	id, _ := in.path.Int("user_id")
	return s.erase(w, r, id, in.user.UserID)
}

func (s *Server) erasePartner(w http.ResponseWriter, r *http.Request, in input) error {
	if err := requireAdmin(in.user); err != nil {
		return err
	}
	id, _ := in.path.Int("partner_id")
	return s.erasing(w, r, func(x *commands.Erasure) (commands.Result, error) {
		return x.ErasePartner(r.Context(), id, in.user.UserID)
	}, projections.PartnersProjection)
}

func (s *Server) erase(w http.ResponseWriter, r *http.Request, userID, actor int64) error {
	return s.erasing(w, r, func(x *commands.Erasure) (commands.Result, error) {
		return x.Erase(r.Context(), userID, actor)
	}, erasedReadModels...)
}

// erasing runs an erasure and answers 204 once the read models that
// anonymise on it have applied it.
func (s *Server) erasing(w http.ResponseWriter, r *http.Request, erase func(*commands.Erasure) (commands.Result, error), readModels ...string) error {
	if s.deps.Commands.Erasure == nil {
		return errors.New("erasure needs a data key (LECTERN_DATA_KEY)")
	}
	res, err := erase(s.deps.Commands.Erasure)
	if err != nil {
		return err
	}
	s.settle(w, r, res, readModels...)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type personalDocumentJSON struct {
	Document documentJSON `json:"document"`
	Text     string       `json:"text"`
}

type personalExportJSON struct {
	ExportedAt         string                 `json:"exported_at"`
	User               userJSON               `json:"user"`
	Agents             []agentJSON            `json:"agents"`
	FewShotExamples    []fewShotJSON          `json:"few_shot_examples"`
	PracticeSessions   []practiceSessionJSON  `json:"practice_sessions"`
	KnowledgeDocuments []personalDocumentJSON `json:"knowledge_documents"`
	Enrollments        []enrollmentJSON       `json:"enrollments"`
	PartnerRecords     []partnerJSON          `json:"partner_records"`
	PromotionRequests  []promotionJSON        `json:"promotion_requests"`
	RateLimitRecords   []rateRecordJSON       `json:"rate_limit_records"`
	// sent_messages follows, written a session at a time (exportMe).
}

type sentMessagesJSON struct {
	SessionID int64                `json:"session_id"`
	Turn      int                  `json:"turn"`
	Messages  []events.ChatMessage `json:"messages"`
}

type rateRecordJSON struct {
	Kind          string   `json:"kind"`
	ClientAddress *string  `json:"client_address"`
	Times         []string `json:"times"`
}

// exportPage is the page size the export reads its lists in.
const exportPage = 200

// allPages reads every page of a list.
func allPages[R any](read func(queries.Page) (queries.List[R], error)) ([]R, error) {
	var out []R
	for page := 1; ; page++ {
		list, err := read(queries.Page{Page: page, Size: exportPage})
		if err != nil {
			return nil, err
		}
		out = append(out, list.Items...)
		if len(list.Items) < exportPage {
			return out, nil
		}
	}
}

func (s *Server) exportMe(w http.ResponseWriter, r *http.Request, in input) error {
	if err := s.awaitMinPosition(w, r, append(erasedReadModels, projections.ClassroomProjection)...); err != nil {
		return err
	}
	ctx, q, id := r.Context(), s.deps.Queries, in.user.UserID
	u, err := q.UserByID(ctx, id)
	if isNotFound(err) {
		return errBadCredentials
	}
	if err != nil {
		return err
	}
	out := personalExportJSON{ExportedAt: ts(time.Now()), Agents: []agentJSON{}, FewShotExamples: []fewShotJSON{},
		PracticeSessions: []practiceSessionJSON{}, KnowledgeDocuments: []personalDocumentJSON{}, Enrollments: []enrollmentJSON{},
		PartnerRecords: []partnerJSON{}, PromotionRequests: []promotionJSON{}, RateLimitRecords: []rateRecordJSON{}}
	partnerIDs, err := q.PartnerIDsOfUser(ctx, id)
	if err != nil {
		return err
	}
	out.User = userJSON{ID: u.ID, Email: u.Email, Name: u.Name, Roles: u.Roles, PartnerIDs: partnerIDs,
		CreatedAt: ts(u.CreatedAt), UpdatedAt: ts(u.UpdatedAt)}

	agents, err := allPages(func(p queries.Page) (queries.List[queries.Agent], error) { return q.Agents(ctx, id, p) })
	if err != nil {
		return err
	}
	for _, a := range agents {
		out.Agents = append(out.Agents, agentFromRow(a))
	}
	examples, err := allPages(func(p queries.Page) (queries.List[queries.FewShotExample], error) {
		return q.ListFewShotExamples(ctx, id, nil, p)
	})
	if err != nil {
		return err
	}
	for _, x := range examples {
		out.FewShotExamples = append(out.FewShotExamples, fewShotFromRow(x))
	}
	sessions, err := allPages(func(p queries.Page) (queries.List[queries.PracticeSession], error) { return q.Sessions(ctx, id, p) })
	if err != nil {
		return err
	}
	for _, ps := range sessions {
		d, err := q.Session(ctx, id, ps.ID)
		if err != nil {
			return err
		}
		out.PracticeSessions = append(out.PracticeSessions, sessionDetailFromRow(d))
	}
	docs, err := allPages(func(p queries.Page) (queries.List[queries.KnowledgeDocument], error) {
		return q.KnowledgeDocuments(ctx, id, p)
	})
	if err != nil {
		return err
	}
	for _, d := range docs {
		text, err := s.deps.Commands.Knowledge.DocumentText(ctx, id, d.ID)
		if err != nil {
			return err
		}
		out.KnowledgeDocuments = append(out.KnowledgeDocuments, personalDocumentJSON{Document: documentFromRow(d), Text: text})
	}
	enrollments, err := allPages(func(p queries.Page) (queries.List[queries.Enrollment], error) {
		return q.StudentEnrollments(ctx, id, p)
	})
	if err != nil {
		return err
	}
	for _, e := range enrollments {
		out.Enrollments = append(out.Enrollments, enrollmentFromRow(e))
	}
	for _, pid := range partnerIDs {
		p, err := q.Partner(ctx, pid)
		if err != nil {
			return err
		}
		out.PartnerRecords = append(out.PartnerRecords, partnerJSON{ID: p.ID, OrgID: p.OrgID, FullName: p.FullName, Email: p.Email,
			Phone: p.Phone, Role: p.Role, IsActive: p.IsActive, UserID: p.UserID, CreatedAt: ts(p.CreatedAt), UpdatedAt: ts(p.UpdatedAt),
			LastLoginAt: tsPtr(p.LastLoginAt)})
	}
	requests, err := q.PromotionRequestsOfUser(ctx, id)
	if err != nil {
		return err
	}
	for _, pr := range requests {
		j := promotionFromRow(pr)
		j.Matching = nil // the admin's aid, not the user's data
		out.PromotionRequests = append(out.PromotionRequests, j)
	}
	records, err := q.RateRecordsOf(ctx, u.Email, commands.JoinFailBucket(id))
	if err != nil {
		return err
	}
	for _, r := range records {
		times := make([]string, len(r.Times))
		for i, at := range r.Times {
			times[i] = ts(at)
		}
		out.RateLimitRecords = append(out.RateLimitRecords, rateRecordJSON{Kind: r.Kind, ClientAddress: r.ClientAddress, Times: times})
	}
	head, err := json.Marshal(out)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Disposition", `attachment; filename="lectern-export.json"`)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	// The messages each turn sent repeat the session's history turn after
	// turn: they are read and written a session at a time, not gathered.
	_, _ = w.Write(head[:len(head)-1])
	_, _ = io.WriteString(w, `,"sent_messages":[`)
	first := true
	for _, ps := range sessions {
		sent, err := s.deps.Commands.Sessions.SentMessages(ctx, id, ps.ID)
		if err != nil {
			// The answer is under way: the client sees it cut short.
			s.deps.Logger.Error("export: read a session's messages", "session_id", ps.ID, "error", err, "request_id", requestID(ctx))
			panic(http.ErrAbortHandler)
		}
		for _, t := range sent {
			messages := t.Messages
			if messages == nil {
				messages = []events.ChatMessage{}
			}
			turn, err := json.Marshal(sentMessagesJSON{SessionID: ps.ID, Turn: t.Turn, Messages: messages})
			if err != nil {
				panic(http.ErrAbortHandler)
			}
			if !first {
				_, _ = io.WriteString(w, ",")
			}
			first = false
			_, _ = w.Write(turn)
		}
	}
	_, _ = io.WriteString(w, "]}")
	return nil
}
