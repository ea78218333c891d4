package aggregates

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"lectern/derrors"
	"lectern/events"
)

// Session is a user's practice chat: its settings, the models it has called
// and every turn.
type Session struct {
	ID           int64
	UserID       int64
	ClassID      *int64
	ProjectID    *int64
	AgentID      *int64
	KnowledgeIDs []int64
	Title        *string
	Settings     Settings
	// Models are the models the session has called, in order of first use.
	Models []SessionModel
	Turns  []Turn
	// Text is the bytes of text its turns recorded (turnText).
	Text      int
	CreatedAt time.Time
	UpdatedAt time.Time
	Version   int64
}

// Exists reports whether the session was started.
func (s Session) Exists() bool { return s.Version > 0 }

// Settings are a session's tuning settings.
type Settings struct {
	SettingID   int64
	StylePreset string
	// StyleParams is a JSON object in canonical form (compact, keys sorted).
	StyleParams      json.RawMessage
	GenerationParams events.GenerationParams
	AgentSnapshot    *events.AgentSnapshot
	FewShotLinks     []Link
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// Link is a few-shot link of a session's settings.
type Link struct {
	ID        int64
	ExampleID int64
	SortOrder int
	CreatedAt time.Time
}

// ExampleIDs are the linked few-shot examples' ids, in sort order.
func (s Settings) ExampleIDs() []int64 {
	ids := make([]int64, len(s.FewShotLinks))
	for i, l := range s.FewShotLinks {
		ids[i] = l.ExampleID
	}
	return ids
}

func (s Settings) event() events.SessionSettings {
	links := make([]events.FewShotLink, len(s.FewShotLinks))
	for i, l := range s.FewShotLinks {
		links[i] = events.FewShotLink{LinkID: l.ID, ExampleID: l.ExampleID, SortOrder: l.SortOrder}
	}
	return events.SessionSettings{SettingID: s.SettingID, StylePreset: s.StylePreset, StyleParams: s.StyleParams,
		GenerationParams: s.GenerationParams, AgentSnapshot: s.AgentSnapshot, FewShotLinks: links}
}

// settingsOf is the state of recorded settings; links already known keep
// their creation time, new ones are created at.
func settingsOf(e events.SessionSettings, prev []Link, at time.Time) Settings {
	links := make([]Link, len(e.FewShotLinks))
	for i, l := range e.FewShotLinks {
		created := at
		for _, p := range prev {
			if p.ID == l.LinkID {
				created = p.CreatedAt
			}
		}
		links[i] = Link{ID: l.LinkID, ExampleID: l.ExampleID, SortOrder: l.SortOrder, CreatedAt: created}
	}
	return Settings{SettingID: e.SettingID, StylePreset: e.StylePreset, StyleParams: e.StyleParams,
		GenerationParams: e.GenerationParams, AgentSnapshot: e.AgentSnapshot, FewShotLinks: links}
}

// SessionModel is a model a session has called; its id is the same in every turn.
type SessionModel struct {
	ID      int64
	ModelID int64
	Name    string
}

// Turn is one prompt and the answers of its models. (Its messages are not
// kept: SentMessages rebuilds them from the turns, for the export.)
type Turn struct {
	Number     int
	PromptText string
	Params     events.TurnParams
	Results    []events.TurnResult
	// Passages are the knowledge passages the turn's prompt carried.
	Passages  []events.Passage
	CreatedAt time.Time
}

// Primary returns the turn's primary result.
func (t Turn) Primary() (events.TurnResult, bool) {
	for _, r := range t.Results {
		if r.IsPrimary {
			return r, true
		}
	}
	return events.TurnResult{}, false
}

// Models are the turn's models, in order.
func (t Turn) Models() []ModelRef {
	out := make([]ModelRef, len(t.Results))
	for i, r := range t.Results {
		out[i] = ModelRef{ID: r.ModelID, Name: r.ModelName, Provider: r.Provider}
		if r.ProviderModel != nil {
			out[i].ProviderModel = *r.ProviderModel
		}
	}
	return out
}

// LastTurn returns the latest turn.
func (s Session) LastTurn() (Turn, bool) {
	if len(s.Turns) == 0 {
		return Turn{}, false
	}
	return s.Turns[len(s.Turns)-1], true
}

// EvolveSession applies one event.
func EvolveSession(s Session, env events.Envelope) Session {
	switch e := env.Event.(type) {
	case events.SessionStarted:
		s = Session{
			ID: e.SessionID, UserID: e.UserID, ClassID: e.ClassID, ProjectID: e.ProjectID, AgentID: e.AgentID,
			KnowledgeIDs: e.KnowledgeIDs, Title: e.Title, CreatedAt: env.RecordedAt,
		}
		if s.KnowledgeIDs == nil {
			s.KnowledgeIDs = []int64{}
		}
		s.Settings = settingsOf(e.Settings, nil, env.RecordedAt)
		s.Settings.CreatedAt, s.Settings.UpdatedAt = env.RecordedAt, env.RecordedAt
	case events.SessionTurnRecorded:
		s.Turns = append(slices.Clip(s.Turns), Turn{Number: e.Turn, PromptText: e.PromptText,
			Params: e.Params, Results: e.Results, Passages: e.Passages, CreatedAt: env.RecordedAt})
		s.Text += turnText(e)
		for _, r := range e.Results {
			if !slices.ContainsFunc(s.Models, func(m SessionModel) bool { return m.ID == r.SessionModelID }) {
				s.Models = append(slices.Clip(s.Models), SessionModel{ID: r.SessionModelID, ModelID: r.ModelID, Name: r.ModelName})
			}
		}
	case events.SessionSettingsUpdated:
		created := s.Settings.CreatedAt
		s.Settings = settingsOf(e.Settings, s.Settings.FewShotLinks, env.RecordedAt)
		s.Settings.CreatedAt, s.Settings.UpdatedAt = created, env.RecordedAt
	}
	s.UpdatedAt = env.RecordedAt
	s.Version = env.Version
	return s
}

// Errors of practice sessions.
var (
	errSessionNotFound = derrors.New(derrors.ErrNotFound, "Session not found")
	errNotEnrolled     = derrors.New(derrors.ErrForbidden, "Only the class's enrolled students and its organisation's partners may practise in it")
	errClassEnded      = derrors.New(derrors.ErrConflict, "The class has ended: it takes no more practice")
	errTurnRace        = derrors.New(derrors.ErrConflict, "The session had another turn while the models answered; send the prompt again")
	errSessionFull     = derrors.New(derrors.ErrConflict,
		"The session holds as much text as a session may (%d MiB); start a new session to go on", MaxSessionText>>20)
)

// MaxSessionText bounds the text a session's turns record, in bytes: every
// turn loads the session's whole stream, and reading the session returns
// every answer, so a session that grew for ever (a turn every 3 s, 100 000
// characters each) would cost each turn and each read more and more memory.
// A turn is refused (409) once the session holds this much with its prompt;
// the answers of the last turn may take it past (by one event at most).
// A turn of usual size (a few thousand bytes) leaves room for hundreds.
const MaxSessionText = 4 << 20

// turnText is the bytes of text a turn's event records: its prompt, the
// messages it sent besides the history (the system message, the few-shot
// examples, the prompt again) and its answers and errors.
func turnText(e events.SessionTurnRecorded) int {
	n := len(e.PromptText)
	for _, m := range e.Messages {
		n += len(m.Content)
	}
	for _, r := range e.Results {
		n += len(r.ResponseText)
		if r.Error != nil {
			n += len(r.Error.Message)
		}
	}
	return n
}

// CheckSessionRoom refuses a turn of prompt in s once s holds MaxSessionText
// with it: before the models are called, so that a turn refused costs
// nothing.
func CheckSessionRoom(s Session, prompt string) error {
	if s.Text+len(prompt) > MaxSessionText {
		return errSessionFull
	}
	return nil
}

// HistoryWindowText bounds the history a turn sends its models: the most
// recent earlier turns whose prompts and primary answers hold at most this
// many bytes together (HistoryWindow). Without a bound, a long session sent
// every model megabytes each turn, on the providers' bill; models' context
// windows are bounded anyway. The session keeps every turn.
const HistoryWindowText = 256 << 10

// HistoryWindow is the last turns of turns that fit in max bytes of history
// (each turn's prompt and its primary answer, as SentMessages puts them
// back): none when the last alone does not.
func HistoryWindow(turns []Turn, max int) []Turn {
	used, k := 0, 0
	for i := len(turns) - 1; i >= 0; i-- {
		t := turns[i]
		used += len(t.PromptText)
		if r, ok := t.Primary(); ok && r.Error == nil {
			used += len(r.ResponseText)
		}
		if used > max {
			break
		}
		k++
	}
	return turns[len(turns)-k:]
}

// ErrUnknownModel is the Kind of the field error about a model name the
// catalogue does not hold; the edge tells the client where to find the
// catalogue.
var ErrUnknownModel = errors.New("unknown model")

// PracticeAccess is what is known of a caller's standing in a class.
type PracticeAccess struct {
	Admin bool
	// Enrolled: the caller has an active enrollment in the class.
	Enrolled bool
	// OrgPartner: the caller is an active partner of the class's organisation.
	OrgPartner bool
	// Ended: the class has ended.
	Ended bool
}

// CheckPracticeAccess allows a practice turn in a class to its actively
// enrolled students, the active partners of its organisation and admins,
// while the class has not ended: an ended class takes no new turns, as it
// admits no one (its sessions stay readable).
func CheckPracticeAccess(a PracticeAccess) error {
	switch {
	case !a.Admin && !a.Enrolled && !a.OrgPartner:
		return errNotEnrolled
	case a.Ended:
		return errClassEnded
	}
	return nil
}

// ModelRef is a catalogue model as a turn calls it.
type ModelRef struct {
	ID            int64
	Name          string
	Provider      string
	ProviderModel string
}

// PracticeClass are the facts of a class a practice turn depends on.
type PracticeClass struct {
	ID              int64
	PrimaryModelID  *int64
	AllowedModelIDs []int64
}

func (c PracticeClass) allows(id int64) bool {
	return len(c.AllowedModelIDs) == 0 || slices.Contains(c.AllowedModelIDs, id)
}

// ModelChoice is what a turn's models are chosen from.
type ModelChoice struct {
	// Requested is model_names as given; empty: none given.
	Requested []string
	// Previous are the models of the session's previous turn; nil for a new session.
	Previous  []ModelRef
	Catalogue []ModelRef
	Default   ModelRef
	Class     PracticeClass
}

// ChooseModels decides a turn's models and which of them is primary (an
// index into them).
//
// Named models must be in the catalogue, named once, and allowed by the class
// (when its allowed_model_ids is not empty); every offending name is reported
// at its index of model_names. With no names, a continued session calls its
// previous turn's models, and a new one the class's primary model, else the
// catalogue's default, else the first of the class's allowed models found in
// the catalogue. The primary is the class's primary model when the turn calls
// it, else the first model.
func ChooseModels(c ModelChoice) ([]ModelRef, int, error) {
	byName := map[string]ModelRef{}
	byID := map[int64]ModelRef{}
	for _, m := range c.Catalogue {
		byName[m.Name], byID[m.ID] = m, m
	}
	var models []ModelRef
	var errs []error
	switch {
	case len(c.Requested) > 0:
		seen := map[string]bool{}
		for i, name := range c.Requested {
			field := derrors.Item("model_names", i)
			m, ok := byName[name]
			switch {
			case !ok:
				errs = append(errs, &derrors.FieldError{Kind: ErrUnknownModel, Field: field, Input: name,
					Msg: fmt.Sprintf("unknown model '%s'", name)})
			case seen[name]:
				errs = append(errs, derrors.InvalidField(field, name, fmt.Sprintf("model '%s' is named more than once", name)))
			case !c.Class.allows(m.ID):
				errs = append(errs, derrors.InvalidField(field, name, fmt.Sprintf("model '%s' is not allowed in this class", name)))
			}
			seen[name] = true
			models = append(models, m)
		}
	case c.Previous != nil:
		for _, prev := range c.Previous {
			m, ok := byName[prev.Name]
			switch {
			case !ok:
				errs = append(errs, derrors.InvalidField("model_names", nil,
					fmt.Sprintf("model '%s' of the previous turn is no longer offered; name the models to call", prev.Name)))
			case !c.Class.allows(m.ID):
				errs = append(errs, derrors.InvalidField("model_names", nil,
					fmt.Sprintf("model '%s' of the previous turn is no longer allowed in this class; name the models to call", prev.Name)))
			}
			models = append(models, m)
		}
	default:
		m, ok := defaultModel(c, byID)
		if !ok {
			return nil, 0, derrors.InvalidField("model_names", nil, "no model of the catalogue is allowed in this class")
		}
		models = []ModelRef{m}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, 0, err
	}
	primary := 0
	if c.Class.PrimaryModelID != nil {
		if i := slices.IndexFunc(models, func(m ModelRef) bool { return m.ID == *c.Class.PrimaryModelID }); i >= 0 {
			primary = i
		}
	}
	return models, primary, nil
}

func defaultModel(c ModelChoice, byID map[int64]ModelRef) (ModelRef, bool) {
	if id := c.Class.PrimaryModelID; id != nil {
		if m, ok := byID[*id]; ok && c.Class.allows(m.ID) {
			return m, true
		}
	}
	if c.Default.Name != "" && c.Class.allows(c.Default.ID) {
		return c.Default, true
	}
	for _, id := range c.Class.AllowedModelIDs {
		if m, ok := byID[id]; ok {
			return m, true
		}
	}
	return ModelRef{}, false
}

// CheckFewShotExamples reports, at its index of few_shot_example_ids, each id
// that is not one of the caller's examples (owned) or repeats an earlier one.
func CheckFewShotExamples(ids []int64, owned map[int64]bool) error {
	var errs []error
	seen := map[int64]bool{}
	for i, id := range ids {
		field := derrors.Item("few_shot_example_ids", i)
		switch {
		case !owned[id]:
			errs = append(errs, derrors.InvalidField(field, id, fmt.Sprintf("few-shot example %d is not one of yours", id)))
		case seen[id]:
			errs = append(errs, derrors.InvalidField(field, id, fmt.Sprintf("few-shot example %d is listed more than once", id)))
		}
		seen[id] = true
	}
	return errors.Join(errs...)
}

// CheckSessionAgent refuses an inactive agent for a new session: its owner
// switched it off. Sessions that started with it keep their snapshot.
func CheckSessionAgent(id int64, active bool) error {
	if !active {
		return derrors.InvalidField("agent_id", id, fmt.Sprintf("agent %d is inactive: activate it, or choose another", id))
	}
	return nil
}

// CheckPrompt refuses a blank prompt.
func CheckPrompt(text string) error {
	if strings.TrimSpace(text) == "" {
		return derrors.InvalidField("prompt_text", text, "prompt_text must not be blank")
	}
	return nil
}

// maxTitle bounds a session title, in characters.
const maxTitle = 60

// SessionTitle is a session's title: its first prompt with runs of white
// space made one space, trimmed to 60 characters at a word boundary (a first
// word longer than that is cut).
func SessionTitle(prompt string) string {
	words := strings.Fields(prompt)
	var b strings.Builder
	n := 0
	for _, w := range words {
		wn := len([]rune(w))
		sep := 0
		if n > 0 {
			sep = 1
		}
		if n+sep+wn > maxTitle {
			if n == 0 {
				return string([]rune(w)[:maxTitle])
			}
			break
		}
		if sep == 1 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
		n += sep + wn
	}
	return b.String()
}

// NewSettings are the settings of a new session: the style preset defaults
// to balanced, style parameters to {} and generation parameters to none.
type NewSettings struct {
	SettingID        int64
	StylePreset      *string
	StyleParams      map[string]any
	GenerationParams events.GenerationParams
	Agent            *events.AgentSnapshot
	// Links are the few-shot links, ids allocated, in order.
	Links []events.FewShotLink
}

// DecideSettings checks and completes a new session's settings.
func DecideSettings(c NewSettings) (events.SessionSettings, error) {
	preset := DefaultStylePreset
	if c.StylePreset != nil {
		preset = *c.StylePreset
	}
	if !slices.Contains(StylePresets, preset) {
		return events.SessionSettings{}, derrors.InvalidField("style_preset", preset, "unknown style preset")
	}
	style, err := canonicalObject(c.StyleParams)
	if err != nil {
		return events.SessionSettings{}, err
	}
	links := c.Links
	if links == nil {
		links = []events.FewShotLink{}
	}
	return events.SessionSettings{SettingID: c.SettingID, StylePreset: preset, StyleParams: style,
		GenerationParams: c.GenerationParams, AgentSnapshot: c.Agent, FewShotLinks: links}, nil
}

// ModelAnswer is one model's outcome, as the gateway reported it.
type ModelAnswer struct {
	Model ModelRef
	// ResponseID is allocated for the answer.
	ResponseID int64
	Text       string
	Usage      events.TokenUsage
	Latency    time.Duration
	Attempts   int
	Error      *events.ModelError
}

// TurnOutcome is a turn as its models answered it.
type TurnOutcome struct {
	PromptText string
	// Messages are the messages sent less the history (Prompt.Recorded),
	// and HistoryTurns the earlier turns the history held.
	Messages     []events.ChatMessage
	HistoryTurns int
	// Passages are the knowledge passages the messages carry.
	Passages []events.Passage
	Params   events.TurnParams
	Answers  []ModelAnswer
	// Primary is the index of the primary answer.
	Primary int
	// FreshModelIDs are session model ids for the models the session has not
	// called before, used in order.
	FreshModelIDs []int64
}

// CheckAnswers refuses a turn no model answered: it is not recorded. The
// error is a *ModelsFailedError.
func CheckAnswers(answers []ModelAnswer) error {
	var failures, kinds []string
	for _, a := range answers {
		if a.Error == nil {
			return nil
		}
		failures = append(failures, a.Model.Name+": "+a.Error.Message)
		kinds = append(kinds, a.Model.Name+": "+a.Error.Kind)
	}
	return &ModelsFailedError{
		Err:   &derrors.Error{Kind: derrors.ErrBadGateway, Detail: fmt.Sprintf("Every model of the turn failed (%s)", strings.Join(failures, "; "))},
		Kinds: kinds,
	}
}

// ModelsFailedError is a turn that no model answered. Err is what the
// caller is told (a 502 naming each model's failure, whose message may
// quote the prompt: a provider echoes what it refuses); Kinds is what may be
// logged, each model's name and the kind of its failure.
type ModelsFailedError struct {
	Err   *derrors.Error
	Kinds []string
}

func (e *ModelsFailedError) Error() string { return e.Err.Error() }

// Unwrap lets errors.Is match ErrBadGateway and errors.As find the Error.
func (e *ModelsFailedError) Unwrap() error { return e.Err }

// turnEvent builds the turn's event: models the session knows keep their
// session model id, new ones take fresh ids.
func turnEvent(s Session, number int, t TurnOutcome) (events.SessionTurnRecorded, error) {
	if err := CheckPrompt(t.PromptText); err != nil {
		return events.SessionTurnRecorded{}, err
	}
	if err := CheckAnswers(t.Answers); err != nil {
		return events.SessionTurnRecorded{}, err
	}
	if t.Primary < 0 || t.Primary >= len(t.Answers) {
		return events.SessionTurnRecorded{}, fmt.Errorf("turn: primary %d of %d answers", t.Primary, len(t.Answers))
	}
	fresh := t.FreshModelIDs
	results := make([]events.TurnResult, len(t.Answers))
	for i, a := range t.Answers {
		var id int64
		if k := slices.IndexFunc(s.Models, func(m SessionModel) bool { return m.Name == a.Model.Name }); k >= 0 {
			id = s.Models[k].ID
		} else {
			if len(fresh) == 0 {
				return events.SessionTurnRecorded{}, errors.New("turn: not enough fresh session model ids")
			}
			id, fresh = fresh[0], fresh[1:]
		}
		text := AnswerText(a.Text)
		if a.Error != nil {
			text = ""
		}
		results[i] = events.TurnResult{
			SessionModelID: id, ModelID: a.Model.ID, ModelName: a.Model.Name, Provider: a.Model.Provider,
			ResponseID: a.ResponseID, ResponseText: text, TokenUsage: a.Usage,
			LatencyMS: a.Latency.Milliseconds(), Attempts: a.Attempts, IsPrimary: i == t.Primary, Error: a.Error,
		}
		if a.Model.ProviderModel != "" {
			results[i].ProviderModel = &a.Model.ProviderModel
		}
	}
	return events.SessionTurnRecorded{SessionID: s.ID, Turn: number, PromptText: t.PromptText, Messages: t.Messages, HistoryTurns: t.HistoryTurns,
		Params: t.Params, Results: results, Passages: t.Passages}, nil
}

// StartSession is the command to start a session with its first turn.
type StartSession struct {
	SessionID    int64
	UserID       int64
	ClassID      *int64
	ProjectID    *int64
	AgentID      *int64
	KnowledgeIDs []int64
	Settings     events.SessionSettings
	Turn         TurnOutcome
}

// DecideStartSession starts the session and records its first turn; the
// title is the first prompt's (see SessionTitle).
func DecideStartSession(s Session, c StartSession) ([]events.Event, error) {
	if s.Exists() {
		return nil, derrors.New(derrors.ErrConflict, "Session already exists")
	}
	knowledge := c.KnowledgeIDs
	if knowledge == nil {
		knowledge = []int64{}
	}
	title := SessionTitle(c.Turn.PromptText)
	started := events.SessionStarted{SessionID: c.SessionID, UserID: c.UserID, ClassID: c.ClassID, ProjectID: c.ProjectID,
		AgentID: c.AgentID, KnowledgeIDs: knowledge, Title: &title, Settings: c.Settings}
	turn, err := turnEvent(Session{ID: c.SessionID}, 1, c.Turn)
	if err != nil {
		return nil, err
	}
	return []events.Event{started, turn}, nil
}

// RecordTurn is the command to add a turn to a session.
type RecordTurn struct {
	SessionID int64
	CallerID  int64
	// AfterTurns is how many turns the session had when the prompt was built.
	AfterTurns int
	Turn       TurnOutcome
}

// DecideRecordTurn records the next turn of the caller's session. A turn
// whose prompt missed a turn recorded meanwhile is a conflict: its history
// would be wrong.
func DecideRecordTurn(s Session, c RecordTurn) ([]events.Event, error) {
	if !s.Exists() || s.UserID != c.CallerID {
		return nil, errSessionNotFound
	}
	if len(s.Turns) != c.AfterTurns {
		return nil, errTurnRace
	}
	if err := CheckSessionRoom(s, c.Turn.PromptText); err != nil {
		return nil, err
	}
	turn, err := turnEvent(s, len(s.Turns)+1, c.Turn)
	if err != nil {
		return nil, err
	}
	return []events.Event{turn}, nil
}

// CheckSessionOwner is the read-side rule: another user's session does not
// exist for the caller.
func CheckSessionOwner(s Session, caller int64) error {
	if !s.Exists() || s.UserID != caller {
		return errSessionNotFound
	}
	return nil
}

// UpdateSessionSettings is a merge update of a session's settings by its
// owner. A field set to nil is reset to its default: style_preset to
// balanced, style_params and generation_params to {}, the few-shot list to
// none. A given few-shot list replaces the list, in its order.
type UpdateSessionSettings struct {
	SessionID         int64
	CallerID          int64
	StylePreset       Patch[*string]
	StyleParams       Patch[map[string]any]
	GenerationParams  Patch[*events.GenerationParams]
	FewShotExampleIDs Patch[[]int64]
	// OwnedExamples are the given few-shot example ids that are the caller's.
	OwnedExamples map[int64]bool
	// FreshLinkIDs are link ids for the examples new to the list, used in order.
	FreshLinkIDs []int64
}

// DecideUpdateSessionSettings applies the settings that change; an update that
// changes nothing records nothing. Links of examples that stay in the list
// keep their ids; the sort order is the list's order (0-based).
func DecideUpdateSessionSettings(s Session, c UpdateSessionSettings) ([]events.Event, error) {
	if err := CheckSessionOwner(s, c.CallerID); err != nil {
		return nil, err
	}
	cur := s.Settings.event()
	next := cur
	var changed []string
	if c.StylePreset.Set {
		preset := DefaultStylePreset
		if c.StylePreset.Value != nil {
			preset = *c.StylePreset.Value
		}
		if !slices.Contains(StylePresets, preset) {
			return nil, derrors.InvalidField("style_preset", preset, "unknown style preset")
		}
		if preset != cur.StylePreset {
			next.StylePreset = preset
			changed = append(changed, "style_preset")
		}
	}
	if c.StyleParams.Set {
		style, err := canonicalObject(c.StyleParams.Value)
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(style, cur.StyleParams) {
			next.StyleParams = style
			changed = append(changed, "style_params")
		}
	}
	if c.GenerationParams.Set {
		var gp events.GenerationParams
		if c.GenerationParams.Value != nil {
			gp = *c.GenerationParams.Value
		}
		if !sameGenerationParams(gp, cur.GenerationParams) {
			next.GenerationParams = gp
			changed = append(changed, "generation_params")
		}
	}
	if c.FewShotExampleIDs.Set {
		ids := c.FewShotExampleIDs.Value
		if err := CheckFewShotExamples(ids, c.OwnedExamples); err != nil {
			return nil, err
		}
		if !slices.Equal(ids, s.Settings.ExampleIDs()) {
			links, err := relink(s.Settings.FewShotLinks, ids, c.FreshLinkIDs)
			if err != nil {
				return nil, err
			}
			next.FewShotLinks = links
			changed = append(changed, "few_shot_example_ids")
		}
	}
	if len(changed) == 0 {
		return nil, nil
	}
	return []events.Event{events.SessionSettingsUpdated{SessionID: s.ID, Settings: next, Changed: changed}}, nil
}

func relink(prev []Link, ids, fresh []int64) ([]events.FewShotLink, error) {
	links := make([]events.FewShotLink, len(ids))
	seen := map[int64]bool{}
	for i, id := range ids {
		if seen[id] {
			return nil, derrors.InvalidField(derrors.Item("few_shot_example_ids", i), id,
				fmt.Sprintf("few-shot example %d is listed more than once", id))
		}
		seen[id] = true
		var linkID int64
		if k := slices.IndexFunc(prev, func(l Link) bool { return l.ExampleID == id }); k >= 0 {
			linkID = prev[k].ID
		} else {
			if len(fresh) == 0 {
				return nil, errors.New("settings: not enough fresh few-shot link ids")
			}
			linkID, fresh = fresh[0], fresh[1:]
		}
		links[i] = events.FewShotLink{LinkID: linkID, ExampleID: id, SortOrder: i}
	}
	return links, nil
}

func sameGenerationParams(a, b events.GenerationParams) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// canonicalObject renders an object compactly with sorted keys; nil is {}.
func canonicalObject(m map[string]any) (json.RawMessage, error) {
	if m == nil {
		return json.RawMessage(`{}`), nil
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("style params: %w", err)
	}
	if len(raw) > MaxStyleParamsBytes {
		return nil, derrors.InvalidField("style_params", m, fmt.Sprintf("style params hold at most %d bytes as JSON", MaxStyleParamsBytes))
	}
	return raw, nil
}

// CheckStyleParams is the style params' field error, if any: for a request
// to report with its other field errors.
func CheckStyleParams(m map[string]any) error {
	_, err := canonicalObject(m)
	return err
}

// MaxStyleParamsBytes bounds a session's style params, as compact JSON:
// they go into the system message of each of its turns, which the turn's
// event records, so without a bound the settings could leave the session's
// turns no room under the append limit. As much as a system prompt may hold.
const MaxStyleParamsBytes = 100_000

// AnswerText is a model's text as a turn records it: U+0000, which a
// provider may send and a text column cannot hold, becomes U+FFFD. What a
// streamed turn shows as it comes goes through it too, so that the stream
// and the recorded turn say the same.
func AnswerText(s string) string { return strings.ReplaceAll(s, "\x00", "\uFFFD") }
