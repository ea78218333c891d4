package commands

import (
	"context"
	"errors"
	"strconv"
	"sync"

	"lectern/aggregates"
	"lectern/events"
	"lectern/eventstore"
	"lectern/llm"
	"lectern/queries"
	"lectern/ratelimit"
)

// Sessions is the practice sessions use cases: start a session with its
// first turn, continue it, tune its settings.
//
// A turn reads what it needs (the class, the caller's standing in it, the
// agent, the few-shot examples), builds the prompt, calls its models in
// parallel with no transaction open, and only then allocates ids and appends
// the turn; when every model failed, nothing is recorded.
type Sessions struct {
	d       Deps
	limiter *ratelimit.Limiter
	turns   ratelimit.Rate // Limits.Turns
	gateway *llm.Gateway
	reads   *queries.DB
	// search grounds turns in the session's knowledge documents.
	search *queries.KnowledgeSearch
}

// NewSessions refuses missing dependencies: it needs d.Gateway, d.Reads and
// d.Search.
func NewSessions(d Deps) (*Sessions, error) {
	err := d.Validate()
	if d.Gateway == nil {
		err = errors.Join(err, errors.New("commands: nil model gateway"))
	}
	if d.Reads == nil {
		err = errors.Join(err, errors.New("commands: nil read models"))
	}
	if d.Search == nil {
		err = errors.Join(err, errors.New("commands: nil knowledge search"))
	}
	if err != nil {
		return nil, err
	}
	return &Sessions{d: d, limiter: ratelimit.New(d.DB, d.Now), turns: d.Limits.withDefaults().Turns,
		gateway: d.Gateway, reads: d.Reads, search: d.Search}, nil
}

func sessionStream(id int64) string { return eventstore.StreamName(events.CategorySession, id) }

// SentMessages are the messages a turn sent its models.
type SentMessages struct {
	Turn     int
	Messages []events.ChatMessage
}

// SentMessages returns, turn by turn, the exact messages the user's
// session sent its models, as its stream holds them (each turn's own, and
// the history of the turns before it): no read model keeps them (the
// personal data export reads them here). Another user's session, or none,
// is not found.
func (s *Sessions) SentMessages(ctx context.Context, userID, sessionID int64) ([]SentMessages, error) {
	var sent []SentMessages
	state, _, _, err := load(ctx, s.d, sessionStream(sessionID), func(st aggregates.Session, env events.Envelope) aggregates.Session {
		if t, ok := env.Event.(events.SessionTurnRecorded); ok {
			earlier := aggregates.LastTurns(st.Turns, t.HistoryTurns)
			sent = append(sent, SentMessages{Turn: t.Turn, Messages: aggregates.SentMessages(t.Messages, earlier)})
		}
		return aggregates.EvolveSession(st, env)
	})
	if err != nil {
		return nil, err
	}
	if err := aggregates.CheckSessionOwner(state, userID); err != nil {
		return nil, err
	}
	return sent, nil
}

// Caller is who asks for a practice turn.
type Caller struct {
	UserID int64
	Admin  bool
}

// RunSession starts a session in a class and runs its first turn (seed 4.1).
type RunSession struct {
	Caller     Caller
	ClassID    int64
	PromptText string
	// ModelNames are the models to call; empty: the class's default.
	ModelNames        []string
	AgentID           *int64
	ProjectID         *int64
	KnowledgeIDs      []int64
	StylePreset       *string
	StyleParams       map[string]any
	GenerationParams  events.GenerationParams
	FewShotExampleIDs []int64
	// Observer, if set, follows the turn as its models stream their answers.
	Observer TurnObserver
}

// ContinueSession runs the next turn of the caller's session (seed 4.2).
type ContinueSession struct {
	Caller     Caller
	SessionID  int64
	PromptText string
	// ModelNames are the models to call; empty: the previous turn's.
	ModelNames []string
	// Observer, if set, follows the turn as its models stream their answers.
	Observer TurnObserver
}

// Run starts the session c describes with its first turn.
func (s *Sessions) Run(ctx context.Context, c RunSession) (aggregates.Session, Result, error) {
	if c.Caller.UserID <= 0 {
		return aggregates.Session{}, Result{}, errors.New("run session: no caller")
	}
	class, err := s.practiceClass(ctx, c.Caller, c.ClassID)
	if err != nil {
		return aggregates.Session{}, Result{}, err
	}
	// Every field error at once, after the class's 404 and 403: the
	// prompt, the models, the few-shot examples, the knowledge documents.
	promptErr := aggregates.CheckPrompt(c.PromptText)
	models, primary, modelErr := aggregates.ChooseModels(s.modelChoice(class, c.ModelNames, nil))
	examples, err := s.reads.FewShotExamples(ctx, c.Caller.UserID, c.FewShotExampleIDs)
	if err != nil {
		return aggregates.Session{}, Result{}, err
	}
	exampleErr := aggregates.CheckFewShotExamples(c.FewShotExampleIDs, owned(examples))
	ownedKnowledge, err := s.reads.OwnedKnowledge(ctx, c.Caller.UserID, c.KnowledgeIDs)
	if err != nil {
		return aggregates.Session{}, Result{}, err
	}
	knowledgeErr := aggregates.CheckKnowledgeIDs(c.KnowledgeIDs, ownedKnowledge)
	styleErr := aggregates.CheckStyleParams(c.StyleParams)
	if err := errors.Join(promptErr, modelErr, exampleErr, knowledgeErr, styleErr); err != nil {
		return aggregates.Session{}, Result{}, err
	}
	var agent *events.AgentSnapshot
	if c.AgentID != nil {
		a, err := s.reads.Agent(ctx, c.Caller.UserID, *c.AgentID)
		if err != nil {
			return aggregates.Session{}, Result{}, err
		}
		if err := aggregates.CheckSessionAgent(a.ID, a.IsActive); err != nil {
			return aggregates.Session{}, Result{}, err
		}
		agent = &events.AgentSnapshot{AgentID: a.ID, Name: a.Name, SystemPrompt: a.SystemPrompt, RoleDescription: a.RoleDescription}
	}
	links := make([]events.FewShotLink, len(c.FewShotExampleIDs))
	for i, id := range c.FewShotExampleIDs {
		links[i] = events.FewShotLink{ExampleID: id, SortOrder: i} // ids once the turn is known to stand
	}
	settings, err := aggregates.DecideSettings(aggregates.NewSettings{StylePreset: c.StylePreset, StyleParams: c.StyleParams,
		GenerationParams: c.GenerationParams, Agent: agent, Links: links})
	if err != nil {
		return aggregates.Session{}, Result{}, err
	}
	prompt := aggregates.Prompt{Agent: agent, StyleParams: settings.StyleParams, Examples: pairs(examples), Text: c.PromptText}
	passages, err := s.ground(ctx, c.Caller.UserID, c.KnowledgeIDs, &prompt)
	if err != nil {
		return aggregates.Session{}, Result{}, err
	}
	allocated := s.allocateAhead(ctx, true, len(models), len(models), len(links))
	if idempotencyFrom(ctx) != nil {
		// Under a key its session id is the one an earlier attempt drew:
		// if that attempt recorded the turn before it died, the turn is
		// the answer, and the models are not asked again.
		ids, err := allocated()
		if err != nil {
			return aggregates.Session{}, Result{}, err
		}
		if again, err := appliedBefore(ctx, s.d, sessionStream(ids.session)); err != nil || again {
			if err != nil {
				return aggregates.Session{}, Result{}, err
			}
			return create(ctx, s.d, sessionStream(ids.session), aggregates.EvolveSession, recordedAlready)
		}
	}
	if err := s.limitTurn(ctx, c.Caller.UserID); err != nil {
		return aggregates.Session{}, Result{}, err
	}
	// A streamed turn names its session first: once its id is drawn.
	gate := startGate(c.Observer, func() (int64, error) { ids, err := allocated(); return ids.session, err })
	turn := s.callModels(ctx, models, primary, prompt, aggregates.EffectiveParams(settings.StylePreset, settings.GenerationParams), gate)
	gate.settle()
	turn.Passages = passages
	if err := aggregates.CheckAnswers(turn.Answers); err != nil {
		return aggregates.Session{}, Result{}, err
	}

	ids, err := allocated()
	if err != nil {
		return aggregates.Session{}, Result{}, err
	}
	settings.SettingID = ids.setting
	for i := range settings.FewShotLinks {
		settings.FewShotLinks[i].LinkID = ids.links[i]
	}
	for i := range turn.Answers {
		turn.Answers[i].ResponseID = ids.responses[i]
	}
	turn.FreshModelIDs = ids.models
	cmd := aggregates.StartSession{SessionID: ids.session, UserID: c.Caller.UserID, ClassID: &class.ID, ProjectID: c.ProjectID,
		AgentID: c.AgentID, KnowledgeIDs: c.KnowledgeIDs, Settings: settings, Turn: turn}
	return create(ctx, s.d, sessionStream(ids.session), aggregates.EvolveSession,
		func(st aggregates.Session) ([]events.Event, error) { return aggregates.DecideStartSession(st, cmd) })
}

// Continue runs the next turn of the caller's session: the prompt carries the
// session's history; the session's class must still admit the caller.
func (s *Sessions) Continue(ctx context.Context, c ContinueSession) (aggregates.Session, Result, error) {
	stream := sessionStream(c.SessionID)
	// Under a key, the load also finds a turn that an attempt recorded
	// before it died (again): that turn is the answer, and the models are
	// not asked again.
	state, _, _, again, err := loadUntil(ctx, s.d, stream, aggregates.EvolveSession, nextEventIDs(ctx, stream))
	if err != nil {
		return state, Result{}, err
	}
	if err := aggregates.CheckSessionOwner(state, c.Caller.UserID); err != nil {
		return state, Result{}, err
	}
	if again {
		return execute(ctx, s.d, stream, aggregates.EvolveSession, recordedAlready)
	}
	var class queries.PracticeClass
	if state.ClassID != nil {
		if class, err = s.practiceClass(ctx, c.Caller, *state.ClassID); err != nil {
			return state, Result{}, err
		}
	}
	var previous []aggregates.ModelRef
	if last, ok := state.LastTurn(); ok {
		previous = last.Models()
	}
	// Every field error at once, after the session's 404 and the class's 403.
	models, primary, modelErr := aggregates.ChooseModels(s.modelChoice(class, c.ModelNames, previous))
	if err := errors.Join(aggregates.CheckPrompt(c.PromptText), modelErr); err != nil {
		return state, Result{}, err
	}
	if err := aggregates.CheckSessionRoom(state, c.PromptText); err != nil {
		return state, Result{}, err
	}
	examples, err := s.reads.FewShotExamples(ctx, c.Caller.UserID, state.Settings.ExampleIDs())
	if err != nil {
		return state, Result{}, err
	}
	prompt := aggregates.Prompt{Agent: state.Settings.AgentSnapshot, StyleParams: state.Settings.StyleParams,
		Examples: pairs(examples), History: aggregates.HistoryWindow(state.Turns, aggregates.HistoryWindowText), Text: c.PromptText}
	passages, err := s.ground(ctx, c.Caller.UserID, state.KnowledgeIDs, &prompt)
	if err != nil {
		return state, Result{}, err
	}
	fresh := 0
	for _, m := range models {
		if !known(state, m.Name) {
			fresh++
		}
	}
	if err := s.limitTurn(ctx, c.Caller.UserID); err != nil {
		return state, Result{}, err
	}
	allocated := s.allocateAhead(ctx, false, fresh, len(models), 0)
	gate := startGate(c.Observer, func() (int64, error) { return c.SessionID, nil })
	turn := s.callModels(ctx, models, primary, prompt,
		aggregates.EffectiveParams(state.Settings.StylePreset, state.Settings.GenerationParams), gate)
	gate.settle()
	turn.Passages = passages
	if err := aggregates.CheckAnswers(turn.Answers); err != nil {
		return state, Result{}, err
	}

	ids, err := allocated()
	if err != nil {
		return state, Result{}, err
	}
	for i := range turn.Answers {
		turn.Answers[i].ResponseID = ids.responses[i]
	}
	turn.FreshModelIDs = ids.models
	cmd := aggregates.RecordTurn{SessionID: c.SessionID, CallerID: c.Caller.UserID, AfterTurns: len(state.Turns), Turn: turn}
	return execute(ctx, s.d, stream, aggregates.EvolveSession,
		func(st aggregates.Session) ([]events.Event, error) { return aggregates.DecideRecordTurn(st, cmd) })
}

// limitTurn takes a token from the user's bucket of turns (Limits.Turns)
// as the turn is about to call its models: a turn refused before (bad
// input, a session not found) or found recorded already (a retry) costs
// none.
func (s *Sessions) limitTurn(ctx context.Context, userID int64) error {
	return allow(ctx, s.limiter, TurnBucket(userID), s.turns, "Too many practice turns; try again later")
}

// TurnBucket is the token bucket of a user's practice turns (erasure
// deletes it).
func TurnBucket(userID int64) string { return "turns:" + strconv.FormatInt(userID, 10) }

// recordedAlready decides a turn found recorded (Run: appliedBefore;
// Continue: its load): run answers with the recorded events before it
// asks (loadUntil).
func recordedAlready(aggregates.Session) ([]events.Event, error) {
	return nil, errors.New("sessions: the turn an earlier attempt recorded was not found")
}

// UpdateSettings applies a merge update of a session's settings by its owner
// (c.FreshLinkIDs is filled here). It also returns the linked few-shot
// examples, in link order, as the read model has them.
func (s *Sessions) UpdateSettings(ctx context.Context, c aggregates.UpdateSessionSettings) (aggregates.Session, []queries.FewShotExample, Result, error) {
	var given []queries.FewShotExample
	if c.FewShotExampleIDs.Set && len(c.FewShotExampleIDs.Value) > 0 {
		ids := c.FewShotExampleIDs.Value
		var err error
		if given, err = s.reads.FewShotExamples(ctx, c.CallerID, ids); err != nil {
			return aggregates.Session{}, nil, Result{}, err
		}
		c.OwnedExamples = owned(given)
		// A link id for each example, in case each is new to the list; the
		// ids of examples already linked are simply not used.
		alloc, err := s.allocate(ctx, false, 0, 0, len(ids))
		if err != nil {
			return aggregates.Session{}, nil, Result{}, err
		}
		c.FreshLinkIDs = alloc.links
	}
	state, res, err := execute(ctx, s.d, sessionStream(c.SessionID), aggregates.EvolveSession,
		func(st aggregates.Session) ([]events.Event, error) {
			return aggregates.DecideUpdateSessionSettings(st, c)
		})
	if err != nil {
		return state, nil, res, err
	}
	ids := state.Settings.ExampleIDs()
	examples := given
	if len(ids) == 0 {
		examples = []queries.FewShotExample{}
	} else if !c.FewShotExampleIDs.Set {
		if examples, err = s.reads.FewShotExamples(ctx, c.CallerID, ids); err != nil {
			return state, nil, res, err
		}
	}
	return state, examples, res, nil
}

// ground retrieves the passages of the caller's documents ids that match
// the prompt's text, each document with its own search settings, and puts
// them into the prompt; it returns what the turn's event records of them.
func (s *Sessions) ground(ctx context.Context, caller int64, ids []int64, p *aggregates.Prompt) ([]events.Passage, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	hits, err := s.search.Passages(ctx, caller, ids, p.Text)
	if err != nil {
		return nil, err
	}
	var out []events.Passage
	for _, h := range hits {
		p.Passages = append(p.Passages, h.Text)
		out = append(out, events.Passage{KnowledgeID: h.KnowledgeID, ChunkID: h.ChunkID, Score: h.Score, Rank: h.Rank})
	}
	return out, nil
}

// practiceClass reads the class and checks that the caller may practise in it.
func (s *Sessions) practiceClass(ctx context.Context, caller Caller, classID int64) (queries.PracticeClass, error) {
	class, err := s.reads.PracticeClass(ctx, caller.UserID, classID)
	if err != nil {
		return class, err
	}
	return class, aggregates.CheckPracticeAccess(aggregates.PracticeAccess{Admin: caller.Admin, Enrolled: class.Enrolled, OrgPartner: class.OrgPartner,
		Ended: class.Ended})
}

func (s *Sessions) modelChoice(class queries.PracticeClass, requested []string, previous []aggregates.ModelRef) aggregates.ModelChoice {
	cat := s.gateway.Catalogue()
	models := cat.Models()
	refs := make([]aggregates.ModelRef, len(models))
	for i, m := range models {
		refs[i] = modelRef(m)
	}
	return aggregates.ModelChoice{Requested: requested, Previous: previous, Catalogue: refs, Default: modelRef(cat.Default()),
		Class: aggregates.PracticeClass{ID: class.ID, PrimaryModelID: class.PrimaryModelID, AllowedModelIDs: class.AllowedModelIDs}}
}

func modelRef(m llm.Model) aggregates.ModelRef {
	return aggregates.ModelRef{ID: m.ID, Name: m.Name, Provider: m.Provider, ProviderModel: m.ProviderModel}
}

// callModels sends the prompt to every model at once, streaming their
// answers through gate when there is one. It holds no database transaction:
// a model may take its whole timeout.
func (s *Sessions) callModels(ctx context.Context, refs []aggregates.ModelRef, primary int, p aggregates.Prompt, params events.TurnParams, gate *turnGate) aggregates.TurnOutcome {
	messages := p.Messages()
	req := llm.Request{Params: llm.Params{Temperature: params.Temperature, TopP: params.TopP,
		MaxTokens: params.MaxTokens, MaxCompletionTokens: params.MaxCompletionTokens}}
	for _, m := range messages {
		req.Messages = append(req.Messages, llm.Message{Role: m.Role, Content: m.Content})
	}
	models := make([]llm.Model, len(refs))
	for i, r := range refs {
		models[i], _ = s.gateway.Catalogue().ByName(r.Name) // the refs came from this catalogue
	}
	var results []llm.Result
	if gate == nil {
		results = s.gateway.CompleteAll(ctx, models, req)
	} else {
		results = s.gateway.StreamAll(ctx, models, req,
			func(i int, text string) { gate.delta(refs[i].Name, aggregates.AnswerText(text)) },
			func(i int, r llm.Result) { gate.ended(answerOf(refs[i], r), i == primary) })
	}
	answers := make([]aggregates.ModelAnswer, len(results))
	for i, r := range results {
		answers[i] = answerOf(refs[i], r)
	}
	recorded, history := p.Recorded()
	return aggregates.TurnOutcome{PromptText: p.Text, Messages: recorded, HistoryTurns: history, Params: params, Answers: answers, Primary: primary}
}

// answerOf is a model's result as the turn records it.
func answerOf(ref aggregates.ModelRef, r llm.Result) aggregates.ModelAnswer {
	a := aggregates.ModelAnswer{Model: ref, Text: aggregates.AnswerText(r.Text), Latency: r.Latency, Attempts: r.Attempts,
		Usage: events.TokenUsage{PromptTokens: r.Usage.PromptTokens, CompletionTokens: r.Usage.CompletionTokens, TotalTokens: r.Usage.TotalTokens}}
	if r.Err != nil {
		a.Error = &events.ModelError{Kind: r.Err.Kind, Message: r.Err.Message}
		a.Usage = events.TokenUsage{}
	}
	return a
}

// sessionIDs are ids allocated for one write.
type sessionIDs struct {
	session, setting         int64
	models, responses, links []int64
}

// allocateAhead draws a turn's ids while its models answer, off the turn's
// critical path; the returned function waits for them (and may be called
// again). The ids of a turn that then fails are skipped, as a sequence
// skips those a rolled-back transaction drew.
func (s *Sessions) allocateAhead(ctx context.Context, newSession bool, models, responses, links int) func() (sessionIDs, error) {
	type drawn struct {
		ids sessionIDs
		err error
	}
	ch := make(chan drawn, 1)
	go func() {
		ids, err := s.allocate(ctx, newSession, models, responses, links)
		ch <- drawn{ids, err}
	}()
	return sync.OnceValues(func() (sessionIDs, error) {
		d := <-ch
		return d.ids, d.err
	})
}

// allocate takes ids from the session sequences in one round trip: a session
// and setting id when newSession, and the given numbers of session model,
// response and few-shot link ids.
func (s *Sessions) allocate(ctx context.Context, newSession bool, models, responses, links int) (sessionIDs, error) {
	var ids sessionIDs
	var session, setting *int64
	err := s.d.DB.QueryRow(ctx, `
		SELECT CASE WHEN $1 THEN nextval('session_ids') END,
			CASE WHEN $1 THEN nextval('session_setting_ids') END,
			ARRAY(SELECT nextval('session_model_ids') FROM generate_series(1, $2) ORDER BY 1),
			ARRAY(SELECT nextval('session_response_ids') FROM generate_series(1, $3) ORDER BY 1),
			ARRAY(SELECT nextval('session_few_shot_link_ids') FROM generate_series(1, $4) ORDER BY 1)`,
		newSession, models, responses, links).Scan(&session, &setting, &ids.models, &ids.responses, &ids.links)
	if session != nil && setting != nil {
		ids.session, ids.setting = *session, *setting
	}
	if err == nil {
		err = rememberSessionIDs(ctx, s.d, newSession, &ids)
	}
	return ids, err
}

func owned(examples []queries.FewShotExample) map[int64]bool {
	out := make(map[int64]bool, len(examples))
	for _, x := range examples {
		out[x.ID] = true
	}
	return out
}

// pairs are the active examples' texts, in order: an inactive example stays
// linked but is left out of the prompt.
func pairs(examples []queries.FewShotExample) []aggregates.FewShotPair {
	var out []aggregates.FewShotPair
	for _, x := range examples {
		if x.IsActive {
			out = append(out, aggregates.FewShotPair{Input: x.InputText, Output: x.OutputText})
		}
	}
	return out
}

func known(s aggregates.Session, model string) bool {
	for _, m := range s.Models {
		if m.Name == model {
			return true
		}
	}
	return false
}
