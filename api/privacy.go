package api

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"lectern/api/validation"
	"lectern/commands"
	"lectern/derrors"
	"lectern/events"
	"lectern/eventstore"
	"lectern/pgtext"
	"lectern/projections"
	"lectern/queries"
	"lectern/quota"
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
		{method: http.MethodDelete, path: "/user/me", id: "erase_me", tag: "privacy", auth: true, unmetered: true,
			summary: "Erase my account and personal data (the password confirms it)", body: &eraseMeBody, status: 204,
			errors: []int{401, 403, 429}, handle: s.eraseMe},
		{method: http.MethodPost, path: "/admin/users/{user_id}/erase", id: "erase_user", tag: "privacy", auth: true, unmetered: true,
			summary: "Erase a user's account and personal data (admin)", pathParams: userPath, status: 204,
			errors: []int{401, 403, 404}, handle: s.eraseUser},
		{method: http.MethodPost, path: "/admin/partners/{partner_id}/erase", id: "erase_partner", tag: "privacy", auth: true, unmetered: true,
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
			"rate_limit_buckets":  arrayOf(ref("RateLimitBucket")),
			"history":             arrayOf(ref("HistoryEvent")),
		}, "exported_at", "user", "agents", "few_shot_examples", "practice_sessions", "knowledge_documents",
			"enrollments", "partner_records", "promotion_requests", "sent_messages", "rate_limit_records", "rate_limit_buckets",
			"history"),
		// An event of one of the caller's own streams, opened: the earlier
		// versions of what they wrote (a session's turns are in
		// practice_sessions and sent_messages instead).
		"HistoryEvent": object(schema{"stream": str(), "version": integer(), "type": str(), "schema_version": integer(),
			"recorded_at": dateTime(), "data": schema{"type": "object"}},
			"stream", "version", "type", "schema_version", "recorded_at", "data"),
		"PersonalDocument": object(schema{"document": ref("KnowledgeDocument"), "text": str()}, "document", "text"),
		// What each turn sent its models: the agent's system prompt, the
		// few-shot examples, the knowledge passages and the history, as sent.
		"SentMessages": object(schema{"session_id": integer(), "turn": integer(),
			"messages": arrayOf(object(schema{"role": str(), "content": str()}, "role", "content"))},
			"session_id", "turn", "messages"),
		// A rate limit's record of the caller's attempts (kept for its window).
		"RateLimitRecord": object(schema{"kind": str(), "client_address": nullable(str()), "times": arrayOf(dateTime())},
			"kind", "client_address", "times"),
		// A rate limit's allowance of the caller's (turns, class joins):
		// when it is whole again.
		"RateLimitBucket": object(schema{"kind": str(), "full_at": dateTime()}, "kind", "full_at"),
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
	if id == in.user.UserID {
		return errEraseYourselfWithPassword
	}
	return s.erase(w, r, id, in.user.UserID)
}

// errEraseYourselfWithPassword is an admin's erasure of their own account
// by the admin route, which a token alone authorises: everyone's own
// erasure is confirmed by their password.
var errEraseYourselfWithPassword = derrors.New(derrors.ErrForbidden, "Erase your own account with DELETE /user/me, which your password confirms")

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

// The export is one JSON object: exported_at, user, agents,
// few_shot_examples, practice_sessions, knowledge_documents, enrollments,
// partner_records, promotion_requests, rate_limit_records,
// rate_limit_buckets, sent_messages, history.
// It is written a member at a time, and the large lists an element at a
// time (exportMe): a user's documents (up to 2 MiB of text each, and as many
// as they uploaded), sessions of many turns, and the messages each turn
// sent, which repeat the session's history, would otherwise all be held at
// once, twice over (the values and their JSON).

// historyEventJSON is an event of one of the caller's streams, opened.
type historyEventJSON struct {
	Stream        string          `json:"stream"`
	Version       int64           `json:"version"`
	Type          string          `json:"type"`
	SchemaVersion int             `json:"schema_version"`
	RecordedAt    string          `json:"recorded_at"`
	Data          json.RawMessage `json:"data"`
}

// historyPage is how many events of a stream the export reads at once: a
// session's turn may be a megabyte.
const historyPage = 16

// exportHistory adds every event of the caller's own streams (their
// account, agents, few-shot examples, documents, partner records and
// promotion requests, and their sessions less the turns, which
// practice_sessions and sent_messages hold already), opened: the earlier
// versions of what they wrote are Lectern's too, in its log, until their
// erasure.
func (s *Server) exportHistory(ctx context.Context, rows *exportRows, add func(any)) error {
	streams := []string{eventstore.StreamName(events.CategoryUser, rows.user.ID)}
	streams = streamsOf(streams, events.CategoryAgent, rows.agents, func(a agentJSON) int64 { return a.AgentID })
	streams = streamsOf(streams, events.CategoryFewShot, rows.examples, func(x fewShotJSON) int64 { return x.ExampleID })
	streams = streamsOf(streams, events.CategorySession, rows.sessions, func(ps queries.PracticeSession) int64 { return ps.ID })
	streams = streamsOf(streams, events.CategoryKnowledge, rows.documents, func(d queries.KnowledgeDocument) int64 { return d.ID })
	streams = streamsOf(streams, events.CategoryPartner, rows.partners, func(p partnerJSON) int64 { return p.ID })
	streams = streamsOf(streams, events.CategoryPromotion, rows.promotions, func(pr promotionJSON) int64 { return pr.RequestID })
	turn := events.SessionTurnRecorded{}.EventType()
	for _, stream := range streams {
		err := eventstore.ReadStreamPages(ctx, s.deps.Commands.Store, stream, historyPage, func(evs []eventstore.RecordedEvent) bool {
			for _, e := range evs {
				if e.Type != turn {
					add(historyEventJSON{Stream: stream, Version: e.Version, Type: e.Type, SchemaVersion: e.SchemaVersion,
						RecordedAt: ts(e.RecordedAt), Data: e.Data})
				}
			}
			return false
		})
		if err != nil {
			return fmt.Errorf("the history of %s: %w", stream, err)
		}
	}
	return nil
}

// streamsOf appends to streams the stream of category of each of rows,
// whose id gives.
func streamsOf[R any](streams []string, category string, rows []R, id func(R) int64) []string {
	for _, r := range rows {
		streams = append(streams, eventstore.StreamName(category, id(r)))
	}
	return streams
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

type rateBucketJSON struct {
	Kind   string `json:"kind"`
	FullAt string `json:"full_at"`
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

// exportRows are the rows of the caller's export that are read before the
// answer starts (a failure is then still an error answer): every list but
// the sessions' details, the documents' texts and the messages sent.
type exportRows struct {
	user       userJSON
	agents     []agentJSON
	examples   []fewShotJSON
	sessions   []queries.PracticeSession
	documents  []queries.KnowledgeDocument
	enrolled   []enrollmentJSON
	partners   []partnerJSON
	promotions []promotionJSON
	rates      []rateRecordJSON
	buckets    []rateBucketJSON
}

func (s *Server) exportMe(w http.ResponseWriter, r *http.Request, in input) error {
	if err := s.awaitMinPosition(w, r, append(erasedReadModels, projections.ClassroomProjection)...); err != nil {
		return err
	}
	ctx, id := r.Context(), in.user.UserID
	exportedAt := ts(time.Now())
	rows, err := s.exportRows(ctx, id)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Disposition", `attachment; filename="lectern-export.json"`)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	out := &streamedObject{w: w, escapeHTML: true}
	out.member("exported_at", exportedAt)
	out.member("user", rows.user)
	out.member("agents", rows.agents)
	out.member("few_shot_examples", rows.examples)
	out.array("practice_sessions", func(add func(any)) error {
		for _, ps := range rows.sessions {
			d, err := s.deps.Queries.Session(ctx, id, ps.ID)
			if isNotFound(err) {
				continue // gone since it was listed
			}
			if err != nil {
				return fmt.Errorf("session %d: %w", ps.ID, err)
			}
			add(sessionDetailFromRow(d))
		}
		return nil
	})
	out.array("knowledge_documents", func(add func(any)) error {
		for _, d := range rows.documents {
			text, err := s.deps.Commands.Knowledge.DocumentText(ctx, id, d.ID)
			if isNotFound(err) {
				continue // deleted since it was listed
			}
			if err != nil {
				return fmt.Errorf("knowledge document %d: %w", d.ID, err)
			}
			add(personalDocumentJSON{Document: documentFromRow(d), Text: text})
		}
		return nil
	})
	out.member("enrollments", rows.enrolled)
	out.member("partner_records", rows.partners)
	out.member("promotion_requests", rows.promotions)
	out.member("rate_limit_records", rows.rates)
	out.member("rate_limit_buckets", rows.buckets)
	out.array("sent_messages", func(add func(any)) error {
		for _, ps := range rows.sessions {
			sent, err := s.deps.Commands.Sessions.SentMessages(ctx, id, ps.ID)
			if isNotFound(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf("the messages of session %d: %w", ps.ID, err)
			}
			for _, t := range sent {
				messages := t.Messages
				if messages == nil {
					messages = []events.ChatMessage{}
				}
				add(sentMessagesJSON{SessionID: ps.ID, Turn: t.Turn, Messages: messages})
			}
		}
		return nil
	})
	out.array("history", func(add func(any)) error {
		return s.exportHistory(ctx, rows, add)
	})
	if err := out.end(); err != nil {
		// The answer is under way: the client sees it cut short. (A client
		// that went away ended the reads itself: nothing to report.)
		if ctx.Err() == nil {
			s.deps.Logger.Error("export: cut short", "error", pgtext.Valueless(err), "request_id", requestID(ctx))
		}
		panic(http.ErrAbortHandler)
	}
	return nil
}

// exportRows reads what exportMe writes before the answer starts.
func (s *Server) exportRows(ctx context.Context, id int64) (*exportRows, error) {
	q := s.deps.Queries
	u, err := s.userOf(ctx, id)
	if err != nil {
		return nil, err
	}
	rows := &exportRows{user: u, agents: []agentJSON{}, examples: []fewShotJSON{}, enrolled: []enrollmentJSON{},
		partners: []partnerJSON{}, promotions: []promotionJSON{}, rates: []rateRecordJSON{},
		buckets: []rateBucketJSON{}}
	agents, err := allPages(func(p queries.Page) (queries.List[queries.Agent], error) { return q.Agents(ctx, id, p) })
	if err != nil {
		return nil, err
	}
	for _, a := range agents {
		rows.agents = append(rows.agents, agentFromRow(a))
	}
	examples, err := allPages(func(p queries.Page) (queries.List[queries.FewShotExample], error) {
		return q.ListFewShotExamples(ctx, id, nil, p)
	})
	if err != nil {
		return nil, err
	}
	for _, x := range examples {
		rows.examples = append(rows.examples, fewShotFromRow(x))
	}
	if rows.sessions, err = allPages(func(p queries.Page) (queries.List[queries.PracticeSession], error) { return q.Sessions(ctx, id, p) }); err != nil {
		return nil, err
	}
	if rows.documents, err = allPages(func(p queries.Page) (queries.List[queries.KnowledgeDocument], error) {
		return q.KnowledgeDocuments(ctx, id, p)
	}); err != nil {
		return nil, err
	}
	enrollments, err := allPages(func(p queries.Page) (queries.List[queries.Enrollment], error) {
		return q.StudentEnrollments(ctx, id, p)
	})
	if err != nil {
		return nil, err
	}
	for _, e := range enrollments {
		rows.enrolled = append(rows.enrolled, enrollmentFromRow(e))
	}
	for _, pid := range u.PartnerIDs {
		p, err := q.Partner(ctx, pid)
		if err != nil {
			return nil, err
		}
		rows.partners = append(rows.partners, partnerJSON{ID: p.ID, OrgID: p.OrgID, FullName: p.FullName, Email: p.Email,
			Phone: p.Phone, Role: p.Role, IsActive: p.IsActive, UserID: p.UserID, CreatedAt: ts(p.CreatedAt), UpdatedAt: ts(p.UpdatedAt),
			LastLoginAt: tsPtr(p.LastLoginAt)})
	}
	requests, err := q.PromotionRequestsOfUser(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, pr := range requests {
		j := promotionFromRow(pr)
		j.Matching = nil // the admin's aid, not the user's data
		rows.promotions = append(rows.promotions, j)
	}
	records, err := q.RateRecordsOf(ctx, u.Email, commands.JoinFailBucket(id), commands.SendCodeBucket(u.Email))
	if err != nil {
		return nil, err
	}
	for _, r := range records {
		times := make([]string, len(r.Times))
		for i, at := range r.Times {
			times[i] = ts(at)
		}
		// The address of a failed attempt is whoever typed the caller's
		// e-mail address, perhaps a stranger: only the caller's own
		// logins (those that succeeded) show theirs.
		addr := r.ClientAddress
		if r.Kind != "login-ok" {
			addr = nil
		}
		rows.rates = append(rows.rates, rateRecordJSON{Kind: r.Kind, ClientAddress: addr, Times: times})
	}
	buckets, err := q.RateBucketsOf(ctx, commands.JoinUserBucket(id), commands.TurnBucket(id), commands.UploadBucket(id), commands.PromotionBucket(id), quota.Bucket(id))
	if err != nil {
		return nil, err
	}
	for _, b := range buckets {
		rows.buckets = append(rows.buckets, rateBucketJSON{Kind: b.Kind, FullAt: ts(b.FullAt)})
	}
	return rows, nil
}

// streamedObject writes a JSON object to w a member at a time, each value
// marshalled as it is written, so that only that value is held. Writes
// that fail (the client went away) are not reported: the rest is written
// to nothing, and the handler ends as it would have. The first failure to
// read or marshal a value is kept, writes nothing more, and is end's.
//
// Values are written as encoding/json writes them, but that '<', '>' and
// '&' are not escaped unless escapeHTML is set (the export keeps the
// escapes it always had).
type streamedObject struct {
	w          io.Writer
	escapeHTML bool
	members    int
	err        error
	buf        bytes.Buffer // the value being marshalled
}

// member writes the member name with the value v.
func (o *streamedObject) member(name string, v any) {
	if b := o.marshal(v); b != nil {
		o.key(name)
		_, _ = o.w.Write(b)
	}
}

// array writes the member name as an array of the values each passes to
// add, in turn; each's error is kept as the object's.
func (o *streamedObject) array(name string, each func(add func(v any)) error) {
	if o.err != nil {
		return // the answer will be cut short: read no more
	}
	o.key(name)
	_, _ = io.WriteString(o.w, "[")
	n := 0
	err := each(func(v any) {
		if b := o.marshal(v); b != nil {
			if n > 0 {
				_, _ = io.WriteString(o.w, ",")
			}
			n++
			_, _ = o.w.Write(b)
		}
	})
	o.err = cmp.Or(o.err, err)
	_, _ = io.WriteString(o.w, "]")
}

// marshal is v's JSON, or nil once the object has failed.
func (o *streamedObject) marshal(v any) []byte {
	if o.err != nil {
		return nil
	}
	o.buf.Reset()
	enc := json.NewEncoder(&o.buf)
	enc.SetEscapeHTML(o.escapeHTML)
	if o.err = enc.Encode(v); o.err != nil {
		return nil
	}
	return bytes.TrimSuffix(o.buf.Bytes(), []byte{'\n'})
}

// key writes what comes before the member name's value.
func (o *streamedObject) key(name string) {
	sep := ","
	if o.members == 0 {
		sep = "{"
	}
	o.members++
	_, _ = io.WriteString(o.w, sep+`"`+name+`":`) // names are the export's own: nothing to escape
}

// end closes the object, or reports its first failure.
func (o *streamedObject) end() error {
	if o.err != nil {
		return o.err
	}
	if o.members == 0 {
		_, _ = io.WriteString(o.w, "{")
	}
	_, _ = io.WriteString(o.w, "}")
	return nil
}
