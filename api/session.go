package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"lectern/aggregates"
	"lectern/api/validation"
	"lectern/commands"
	"lectern/events"
	"lectern/projections"
	"lectern/queries"
)

// maxTokens bounds max_tokens and max_completion_tokens (DESIGN §4).
const maxTokens = 32_768

var (
	sessionReadModels = []string{projections.SessionsProjection}
	sessionPath       = []validation.Field{idParam("session_id")}
	runSessionQuery   = []validation.Field{{Name: "class_id", Kind: validation.Int, Required: true, Ge: bound(1)}}

	modelNamesField = validation.Field{Name: "model_names", Kind: validation.List, Nullable: true, MaxItems: maxModelsPerTurn,
		Elem: &validation.Field{Kind: validation.String, MaxLength: maxName}}
	stylePresetField = validation.Field{Name: "style_preset", Kind: validation.Enum, Enum: aggregates.StylePresets, Nullable: true}
	fewShotIDsField  = validation.Field{Name: "few_shot_example_ids", Kind: validation.List, Nullable: true, MaxItems: maxFewShotIDs,
		Elem: &validation.Field{Kind: validation.Int, Ge: bound(1)}}
	generationParamsDoc = "temperature (0..2), top_p (0..1), response_length_preset (short 256, medium 1024, long 4096 " +
		"max_tokens, unless max tokens are given), max_completion_tokens and max_tokens (1..32768); other keys are ignored"

	// generationParamsSchema checks the generation_params object's members
	// (at ["body","generation_params",...]); null members count as absent.
	generationParamsSchema = validation.Schema{Fields: []validation.Field{
		{Name: "temperature", Kind: validation.Float, Nullable: true, Ge: bound(0), Le: bound(2)},
		{Name: "top_p", Kind: validation.Float, Nullable: true, Ge: bound(0), Le: bound(1)},
		{Name: "response_length_preset", Kind: validation.Enum, Nullable: true, Enum: aggregates.ResponseLengthPresets},
		{Name: "max_completion_tokens", Kind: validation.Int, Nullable: true, Ge: bound(1), Le: bound(maxTokens)},
		{Name: "max_tokens", Kind: validation.Int, Nullable: true, Ge: bound(1), Le: bound(maxTokens)},
	}}

	runSessionBody = validation.Schema{Fields: []validation.Field{
		{Name: "prompt_text", Kind: validation.String, Required: true, MinLength: 1, MaxLength: maxText},
		modelNamesField,
		{Name: "agent_id", Kind: validation.Int, Nullable: true, Ge: bound(1)},
		{Name: "project_id", Kind: validation.Int, Nullable: true, Ge: bound(1)},
		{Name: "knowledge_ids", Kind: validation.List, Nullable: true, MaxItems: maxKnowledgeIDs, Elem: &validation.Field{Kind: validation.Int, Ge: bound(1)},
			Description: "stored on the session"},
		{Name: stylePresetField.Name, Kind: stylePresetField.Kind, Enum: stylePresetField.Enum, Nullable: true,
			Default: aggregates.DefaultStylePreset},
		{Name: "style_params", Kind: validation.Object, MaxItems: maxObjectKeys, Default: map[string]any{},
			Description: "free-form; each key and value is added to the system message; at most 100 000 bytes as JSON"},
		{Name: "generation_params", Kind: validation.Object, MaxItems: maxObjectKeys, Members: &generationParamsSchema, Default: map[string]any{}, Description: generationParamsDoc},
		fewShotIDsField,
	}}
	chatSessionBody = validation.Schema{Fields: []validation.Field{
		{Name: "prompt_text", Kind: validation.String, Required: true, MinLength: 1, MaxLength: maxText},
		{Name: modelNamesField.Name, Kind: modelNamesField.Kind, Elem: modelNamesField.Elem, MaxItems: modelNamesField.MaxItems, Nullable: true,
			Description: "absent, null or empty: the models of the previous turn"},
	}}
	// Every field is optional; null resets a field to its default.
	sessionSettingsBody = validation.Schema{Fields: []validation.Field{
		{Name: stylePresetField.Name, Kind: stylePresetField.Kind, Enum: stylePresetField.Enum, Nullable: true,
			Description: "null resets it to balanced"},
		{Name: "style_params", Kind: validation.Object, MaxItems: maxObjectKeys, Nullable: true, Description: "replaces the whole object; null resets it to {}; at most 100 000 bytes as JSON"},
		{Name: "generation_params", Kind: validation.Object, MaxItems: maxObjectKeys, Members: &generationParamsSchema, Nullable: true,
			Description: "replaces the whole object; null resets it to {}. " + generationParamsDoc},
		{Name: fewShotIDsField.Name, Kind: fewShotIDsField.Kind, Elem: fewShotIDsField.Elem, MaxItems: fewShotIDsField.MaxItems, Nullable: true,
			Description: "replaces the list, in this order; null empties it"},
	}}
)

// sessionOperations are the practice sessions (seed 4.1–4.5).
func (s *Server) sessionOperations() []operation {
	return []operation{
		{method: http.MethodPost, path: "/user/practice/sessions/run", id: "run_practice_session", tag: "practice", auth: true,
			idempotent: true, summary: "Start a practice session in a class and run its first turn", query: runSessionQuery,
			body: &runSessionBody, status: 201, response: "SessionTurn", errors: []int{401, 403, 404, 409, 429, 502},
			location: &locatedBy{get: "get_practice_session", id: "session_id"}, handle: s.runSession},
		{method: http.MethodPost, path: "/user/practice/sessions/{session_id}/chat", id: "continue_practice_session", tag: "practice",
			auth: true, idempotent: true, summary: "Run the next turn of my session", pathParams: sessionPath,
			body: &chatSessionBody, status: 200, response: "SessionTurn", errors: []int{401, 403, 404, 409, 429, 502},
			handle: s.chatSession},
		{method: http.MethodPatch, path: "/user/practice/sessions/{session_id}/settings", id: "update_session_settings", tag: "practice",
			auth: true, summary: "Update my session's settings (merge; null resets a field to its default)", pathParams: sessionPath,
			body: &sessionSettingsBody, status: 200, response: "SessionSettings", errors: []int{401, 404, 409},
			handle: s.updateSessionSettings},
		{method: http.MethodGet, path: "/user/practice/sessions", id: "list_practice_sessions", tag: "practice", auth: true,
			summary: "List my sessions, newest first (without settings and responses)", query: pageQuery, status: 200,
			response: "PracticeSessionList", errors: []int{401}, handle: s.listSessions},
		{method: http.MethodGet, path: "/user/practice/sessions/{session_id}", id: "get_practice_session", tag: "practice", auth: true,
			summary: "Read my session with its settings and every response", pathParams: sessionPath, status: 200,
			response: "PracticeSession", errors: []int{401, 404}, handle: s.getSession},
	}
}

// orNull is a schema that also accepts null (for references).
func orNull(s schema) schema { return schema{"anyOf": []any{s, schema{"type": "null"}}} }

func numeric() schema { return schema{"type": "number"} }

// nullableEnum is one of values, or null.
func nullableEnum(values []string) schema {
	enum := make([]any, 0, len(values)+1)
	for _, v := range values {
		enum = append(enum, v)
	}
	return schema{"type": []any{"string", "null"}, "enum": append(enum, nil)}
}

// sessionComponents are their response schemas.
func sessionComponents() schema {
	usage := object(schema{"prompt_tokens": integer(), "completion_tokens": integer(), "total_tokens": integer()},
		"prompt_tokens", "completion_tokens", "total_tokens")
	return schema{
		"TurnTokenUsage": usage,
		"TurnModelError": object(schema{"kind": str(), "message": str()}, "kind", "message"),
		"TurnGenerationParams": object(schema{
			"temperature": nullable(numeric()), "top_p": nullable(numeric()),
			"max_tokens": nullable(integer()), "max_completion_tokens": nullable(integer()),
		}, "temperature", "top_p", "max_tokens", "max_completion_tokens"),
		"TurnModelResult": object(schema{
			"session_model_id": integer(), "model_name": str(), "response_id": integer(), "prompt_text": str(),
			"response_text": str(), "created_at": dateTime(), "token_usage": ref("TurnTokenUsage"), "latency_ms": integer(),
			"is_primary": boolean(), "generation_params": ref("TurnGenerationParams"), "error": orNull(ref("TurnModelError")),
		}, "session_model_id", "model_name", "response_id", "prompt_text", "response_text", "created_at", "token_usage",
			"latency_ms", "is_primary", "generation_params", "error"),
		"SessionTurn": object(schema{
			"session_id": integer(), "prompt_text": str(), "results": arrayOf(ref("TurnModelResult")), "session_title": nullable(str()),
		}, "session_id", "prompt_text", "results", "session_title"),
		"SessionGenerationParams": object(schema{
			"temperature": nullable(numeric()), "top_p": nullable(numeric()),
			"response_length_preset": nullableEnum(aggregates.ResponseLengthPresets),
			"max_completion_tokens":  nullable(integer()), "max_tokens": nullable(integer()),
		}, "temperature", "top_p", "response_length_preset", "max_completion_tokens", "max_tokens"),
		"SessionAgentSnapshot": object(schema{
			"agent_id": integer(), "name": str(), "system_prompt": str(), "role_description": nullable(str()),
		}),
		"SessionFewShotLink": object(schema{
			"id": integer(), "setting_id": integer(), "example_id": integer(), "sort_order": integer(), "created_at": dateTime(),
			"example": orNull(ref("FewShotExample")),
		}, "id", "setting_id", "example_id", "sort_order", "created_at", "example"),
		"SessionSettings": object(schema{
			"setting_id": integer(), "session_id": integer(), "created_at": dateTime(), "updated_at": dateTime(),
			"style_preset": enumOf(aggregates.StylePresets), "style_params": schema{"type": "object"},
			"generation_params": ref("SessionGenerationParams"), "agent_snapshot": ref("SessionAgentSnapshot"),
			"few_shot_links": arrayOf(ref("SessionFewShotLink")),
		}, "setting_id", "session_id", "created_at", "updated_at", "style_preset", "style_params", "generation_params",
			"agent_snapshot", "few_shot_links"),
		"SessionResponse": object(schema{
			"response_id": integer(), "session_model_id": integer(), "session_id": integer(), "model_name": str(),
			"prompt_text": str(), "response_text": str(), "created_at": dateTime(), "token_usage": ref("TurnTokenUsage"),
			"latency_ms": integer(), "turn": integer(), "is_primary": boolean(),
			"generation_params": ref("TurnGenerationParams"), "error": orNull(ref("TurnModelError")),
		}, "response_id", "session_model_id", "session_id", "model_name", "prompt_text", "response_text", "created_at",
			"token_usage", "latency_ms", "turn", "is_primary", "generation_params", "error"),
		"PracticeSession": object(schema{
			"session_id": integer(), "user_id": integer(), "created_at": dateTime(), "updated_at": dateTime(),
			"class_id": nullable(integer()), "project_id": nullable(integer()), "knowledge_ids": arrayOf(integer()),
			"agent_id": nullable(integer()), "title": nullable(str()), "notes": nullable(str()),
			"settings": ref("SessionSettings"), "responses": arrayOf(ref("SessionResponse")),
		}, "session_id", "user_id", "created_at", "updated_at", "class_id", "project_id", "knowledge_ids", "agent_id",
			"title", "notes"),
		"PracticeSessionList": listOf("PracticeSession"),
	}
}

// The wire shapes, fields in the seed's order.

type turnResultJSON struct {
	SessionModelID   int64              `json:"session_model_id"`
	ModelName        string             `json:"model_name"`
	ResponseID       int64              `json:"response_id"`
	PromptText       string             `json:"prompt_text"`
	ResponseText     string             `json:"response_text"`
	CreatedAt        string             `json:"created_at"`
	TokenUsage       events.TokenUsage  `json:"token_usage"`
	LatencyMS        int64              `json:"latency_ms"`
	IsPrimary        bool               `json:"is_primary"`
	GenerationParams events.TurnParams  `json:"generation_params"`
	Error            *events.ModelError `json:"error"`
}

type sessionTurnJSON struct {
	SessionID    int64            `json:"session_id"`
	PromptText   string           `json:"prompt_text"`
	Results      []turnResultJSON `json:"results"`
	SessionTitle *string          `json:"session_title"`
}

type fewShotLinkJSON struct {
	ID        int64        `json:"id"`
	SettingID int64        `json:"setting_id"`
	ExampleID int64        `json:"example_id"`
	SortOrder int          `json:"sort_order"`
	CreatedAt string       `json:"created_at"`
	Example   *fewShotJSON `json:"example"`
}

type sessionSettingsJSON struct {
	SettingID        int64             `json:"setting_id"`
	SessionID        int64             `json:"session_id"`
	CreatedAt        string            `json:"created_at"`
	UpdatedAt        string            `json:"updated_at"`
	StylePreset      string            `json:"style_preset"`
	StyleParams      json.RawMessage   `json:"style_params"`
	GenerationParams json.RawMessage   `json:"generation_params"`
	AgentSnapshot    json.RawMessage   `json:"agent_snapshot"`
	FewShotLinks     []fewShotLinkJSON `json:"few_shot_links"`
}

type sessionResponseJSON struct {
	ResponseID       int64           `json:"response_id"`
	SessionModelID   int64           `json:"session_model_id"`
	SessionID        int64           `json:"session_id"`
	ModelName        string          `json:"model_name"`
	PromptText       string          `json:"prompt_text"`
	ResponseText     string          `json:"response_text"`
	CreatedAt        string          `json:"created_at"`
	TokenUsage       json.RawMessage `json:"token_usage"`
	LatencyMS        int64           `json:"latency_ms"`
	Turn             int             `json:"turn"`
	IsPrimary        bool            `json:"is_primary"`
	GenerationParams json.RawMessage `json:"generation_params"`
	Error            json.RawMessage `json:"error"`
}

type practiceSessionJSON struct {
	SessionID    int64                  `json:"session_id"`
	UserID       int64                  `json:"user_id"`
	CreatedAt    string                 `json:"created_at"`
	UpdatedAt    string                 `json:"updated_at"`
	ClassID      *int64                 `json:"class_id"`
	ProjectID    *int64                 `json:"project_id"`
	KnowledgeIDs []int64                `json:"knowledge_ids"`
	AgentID      *int64                 `json:"agent_id"`
	Title        *string                `json:"title"`
	Notes        *string                `json:"notes"`
	Settings     *sessionSettingsJSON   `json:"settings,omitempty"`
	Responses    *[]sessionResponseJSON `json:"responses,omitempty"`
}

// turnFromState is the session's last turn.
func turnFromState(s aggregates.Session) sessionTurnJSON {
	out := sessionTurnJSON{SessionID: s.ID, SessionTitle: s.Title, Results: []turnResultJSON{}}
	t, _ := s.LastTurn()
	out.PromptText = t.PromptText
	for _, r := range t.Results {
		out.Results = append(out.Results, turnResultJSON{
			SessionModelID: r.SessionModelID, ModelName: r.ModelName, ResponseID: r.ResponseID, PromptText: t.PromptText,
			ResponseText: r.ResponseText, CreatedAt: ts(t.CreatedAt), TokenUsage: r.TokenUsage, LatencyMS: r.LatencyMS,
			IsPrimary: r.IsPrimary, GenerationParams: t.Params, Error: r.Error,
		})
	}
	return out
}

// mustJSON renders a value the encoder cannot fail on.
func mustJSON(v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		panic("api: " + err.Error())
	}
	return raw
}

// settingsFromState renders a session's settings; examples are the linked
// few-shot examples (any order).
func settingsFromState(s aggregates.Session, examples []queries.FewShotExample) sessionSettingsJSON {
	st := s.Settings
	agent := json.RawMessage(`{}`)
	if st.AgentSnapshot != nil {
		agent = mustJSON(st.AgentSnapshot)
	}
	byID := map[int64]queries.FewShotExample{}
	for _, x := range examples {
		byID[x.ID] = x
	}
	out := sessionSettingsJSON{SettingID: st.SettingID, SessionID: s.ID, CreatedAt: ts(st.CreatedAt), UpdatedAt: ts(st.UpdatedAt),
		StylePreset: st.StylePreset, StyleParams: metaObject(st.StyleParams), GenerationParams: mustJSON(st.GenerationParams),
		AgentSnapshot: agent, FewShotLinks: []fewShotLinkJSON{}}
	for _, l := range st.FewShotLinks {
		link := fewShotLinkJSON{ID: l.ID, SettingID: st.SettingID, ExampleID: l.ExampleID, SortOrder: l.SortOrder, CreatedAt: ts(l.CreatedAt)}
		if x, ok := byID[l.ExampleID]; ok {
			ex := fewShotFromRow(x)
			link.Example = &ex
		}
		out.FewShotLinks = append(out.FewShotLinks, link)
	}
	return out
}

func sessionFromRow(s queries.PracticeSession) practiceSessionJSON {
	return practiceSessionJSON{SessionID: s.ID, UserID: s.UserID, CreatedAt: ts(s.CreatedAt), UpdatedAt: ts(s.UpdatedAt),
		ClassID: s.ClassID, ProjectID: s.ProjectID, KnowledgeIDs: s.KnowledgeIDs, AgentID: s.AgentID, Title: s.Title, Notes: s.Notes}
}

func sessionDetailFromRow(d queries.SessionDetail) practiceSessionJSON {
	out := sessionFromRow(d.PracticeSession)
	st := d.Settings
	settings := sessionSettingsJSON{SettingID: st.SettingID, SessionID: st.SessionID, CreatedAt: ts(st.CreatedAt),
		UpdatedAt: ts(st.UpdatedAt), StylePreset: st.StylePreset, StyleParams: metaObject(st.StyleParams),
		GenerationParams: metaObject(st.GenerationParams), AgentSnapshot: metaObject(st.AgentSnapshot),
		FewShotLinks: []fewShotLinkJSON{}}
	for _, l := range st.FewShotLinks {
		link := fewShotLinkJSON{ID: l.ID, SettingID: l.SettingID, ExampleID: l.ExampleID, SortOrder: l.SortOrder, CreatedAt: ts(l.CreatedAt)}
		if l.Example != nil {
			ex := fewShotFromRow(*l.Example)
			link.Example = &ex
		}
		settings.FewShotLinks = append(settings.FewShotLinks, link)
	}
	out.Settings = &settings
	responses := []sessionResponseJSON{}
	for _, r := range d.Responses {
		failure := r.Error
		if len(failure) == 0 {
			failure = json.RawMessage(`null`)
		}
		responses = append(responses, sessionResponseJSON{
			ResponseID: r.ID, SessionModelID: r.SessionModelID, SessionID: r.SessionID, ModelName: r.ModelName,
			PromptText: r.PromptText, ResponseText: r.ResponseText, CreatedAt: ts(r.CreatedAt), TokenUsage: r.TokenUsage,
			LatencyMS: r.LatencyMS, Turn: r.Turn, IsPrimary: r.IsPrimary, GenerationParams: r.GenerationParams, Error: failure,
		})
	}
	out.Responses = &responses
	return out
}

// generationParamsOf validates a generation_params object member by member.
func generationParamsOf(v validation.Values, name string) (events.GenerationParams, error) {
	var gp events.GenerationParams
	obj, ok := v.Object(name)
	if !ok {
		return gp, nil
	}
	vals, errs := generationParamsSchema.Validate([]any{"body", name}, obj)
	if len(errs) > 0 {
		return gp, errs
	}
	if f, ok := vals.Float("temperature"); ok {
		gp.Temperature = &f
	}
	if f, ok := vals.Float("top_p"); ok {
		gp.TopP = &f
	}
	if s, ok := vals.String("response_length_preset"); ok {
		gp.ResponseLengthPreset = &s
	}
	if n, ok := vals.Int("max_completion_tokens"); ok {
		m := int(n)
		gp.MaxCompletionTokens = &m
	}
	if n, ok := vals.Int("max_tokens"); ok {
		m := int(n)
		gp.MaxTokens = &m
	}
	return gp, nil
}

func nullableID(v validation.Values, name string) *int64 {
	if n, ok := v.Int(name); ok {
		return &n
	}
	return nil
}

func callerOf(p *Principal) commands.Caller {
	return commands.Caller{UserID: p.UserID, Admin: p.HasRole(aggregates.RoleAdmin)}
}

// turnFailure renders what the error table cannot: every field error of a
// turn at once (the domain joins them), and a 502 whose detail names each
// model's failure. It returns the error to render otherwise, nil when done.
func (s *Server) turnFailure(w http.ResponseWriter, r *http.Request, err error) error {
	var failed *aggregates.ModelsFailedError
	if errors.As(err, &failed) {
		// Not the models' messages: they may quote the prompt, which
		// must not outlive an erasure in the log.
		s.deps.Logger.Warn("every model of a practice turn failed", "status", http.StatusBadGateway, "models", failed.Kinds,
			"request_id", requestID(r.Context()))
		writeDetail(w, http.StatusBadGateway, failed.Err.Detail)
		return nil
	}
	return fieldErrors(err)
}

func (s *Server) runSession(w http.ResponseWriter, r *http.Request, in input) error {
	gp, err := generationParamsOf(in.body, "generation_params")
	if err != nil {
		return err
	}
	c := commands.RunSession{Caller: callerOf(in.user), GenerationParams: gp}
	c.ClassID, _ = in.query.Int("class_id")
	c.PromptText, _ = in.body.String("prompt_text")
	c.ModelNames, _ = in.body.Strings("model_names")
	c.AgentID, c.ProjectID = nullableID(in.body, "agent_id"), nullableID(in.body, "project_id")
	c.KnowledgeIDs, _ = in.body.Ints("knowledge_ids")
	if v, ok := in.body.String("style_preset"); ok {
		c.StylePreset = &v
	}
	c.StyleParams, _ = in.body.Object("style_params")
	c.FewShotExampleIDs, _ = in.body.Ints("few_shot_example_ids")
	s.answerTurnLate(w, "run_practice_session")
	if wantsStream(r) {
		return s.streamTurn(w, r, http.StatusCreated, func(ctx context.Context, obs commands.TurnObserver) (aggregates.Session, commands.Result, error) {
			c.Observer = obs
			return s.deps.Commands.Sessions.Run(ctx, c)
		})
	}
	state, res, err := s.deps.Commands.Sessions.Run(r.Context(), c)
	if err != nil {
		return s.turnFailure(w, r, err)
	}
	s.settle(w, r, res, sessionReadModels...)
	writeJSON(w, http.StatusCreated, turnFromState(state))
	return nil
}

func (s *Server) chatSession(w http.ResponseWriter, r *http.Request, in input) error {
	c := commands.ContinueSession{Caller: callerOf(in.user)}
	c.SessionID, _ = in.path.Int("session_id")
	c.PromptText, _ = in.body.String("prompt_text")
	c.ModelNames, _ = in.body.Strings("model_names")
	s.answerTurnLate(w, "continue_practice_session")
	if wantsStream(r) {
		return s.streamTurn(w, r, http.StatusOK, func(ctx context.Context, obs commands.TurnObserver) (aggregates.Session, commands.Result, error) {
			c.Observer = obs
			return s.deps.Commands.Sessions.Continue(ctx, c)
		})
	}
	state, res, err := s.deps.Commands.Sessions.Continue(r.Context(), c)
	if err != nil {
		return s.turnFailure(w, r, err)
	}
	s.settle(w, r, res, sessionReadModels...)
	writeJSON(w, http.StatusOK, turnFromState(state))
	return nil
}

// answerTurnLate lets a turn answer as late as its bound allows: the
// connection's write deadline, set as the request was read (the server's
// WriteTimeout), may come first, and the client would get nothing for a
// turn recorded. This holds for a turn answered whole, and for a stream
// kept whole (under an Idempotency-Key); a live stream moves it at each
// event.
func (s *Server) answerTurnLate(w http.ResponseWriter, opID string) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.writeBound(opID) + streamWriteWait))
}

func (s *Server) updateSessionSettings(w http.ResponseWriter, r *http.Request, in input) error {
	id, _ := in.path.Int("session_id")
	c := aggregates.UpdateSessionSettings{SessionID: id, CallerID: in.user.UserID}
	if in.body.Has("style_preset") {
		var preset *string // nil for null: reset to balanced
		if v, ok := in.body.String("style_preset"); ok {
			preset = &v
		}
		c.StylePreset = aggregates.Set(preset)
	}
	if in.body.Has("style_params") {
		m, _ := in.body.Object("style_params") // nil for null: reset to {}
		c.StyleParams = aggregates.Set(m)
	}
	if in.body.Has("generation_params") {
		var gp *events.GenerationParams // nil for null: reset to {}
		if !in.body.IsNull("generation_params") {
			given, err := generationParamsOf(in.body, "generation_params")
			if err != nil {
				return err
			}
			gp = &given
		}
		c.GenerationParams = aggregates.Set(gp)
	}
	if in.body.Has("few_shot_example_ids") {
		ids, _ := in.body.Ints("few_shot_example_ids") // nil for null: no examples
		c.FewShotExampleIDs = aggregates.Set(ids)
	}
	state, examples, res, err := s.deps.Commands.Sessions.UpdateSettings(r.Context(), c)
	if err != nil {
		return fieldErrors(err)
	}
	s.settle(w, r, res, sessionReadModels...)
	writeJSON(w, http.StatusOK, settingsFromState(state, examples))
	return nil
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request, in input) error {
	if err := s.awaitMinPosition(w, r, sessionReadModels...); err != nil {
		return err
	}
	list, err := s.deps.Queries.Sessions(r.Context(), in.user.UserID, pageOf(in.query))
	if err != nil {
		return err
	}
	writeSessionList(w, list)
	return nil
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request, in input) error {
	if err := s.awaitMinPosition(w, r, sessionReadModels...); err != nil {
		return err
	}
	id, _ := in.path.Int("session_id")
	d, err := s.deps.Queries.Session(r.Context(), in.user.UserID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sessionDetailFromRow(d))
	return nil
}
