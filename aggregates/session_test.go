package aggregates_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"lectern/aggregates"
	"lectern/derrors"
	"lectern/events"
)

var (
	echo    = aggregates.ModelRef{ID: 1, Name: "echo", Provider: "echo"}
	reverse = aggregates.ModelRef{ID: 2, Name: "echo-reverse", Provider: "echo-reverse"}
	gpt     = aggregates.ModelRef{ID: 3, Name: "gpt", Provider: "openai", ProviderModel: "gpt-4o-mini"}

	balanced = events.SessionSettings{SettingID: 5, StylePreset: "balanced", StyleParams: json.RawMessage(`{}`),
		FewShotLinks: []events.FewShotLink{}}
	warmParams = events.TurnParams{Temperature: ptr(0.7), TopP: ptr(1.0)}

	started = events.SessionStarted{SessionID: 9, UserID: 7, ClassID: ptr[int64](3), KnowledgeIDs: []int64{},
		Title: ptr("Hello there"), Settings: balanced}
	firstTurn = events.SessionTurnRecorded{SessionID: 9, Turn: 1, PromptText: "Hello there",
		Messages: []events.ChatMessage{{Role: "user", Content: "Hello there"}}, Params: warmParams,
		Results: []events.TurnResult{
			{SessionModelID: 21, ModelID: 1, ModelName: "echo", Provider: "echo", ResponseID: 31, ResponseText: "Hello there",
				TokenUsage: events.TokenUsage{PromptTokens: 2, CompletionTokens: 2, TotalTokens: 4}, LatencyMS: 3, Attempts: 1, IsPrimary: true},
		}}
)

func answer(m aggregates.ModelRef, response int64, text string) aggregates.ModelAnswer {
	return aggregates.ModelAnswer{Model: m, ResponseID: response, Text: text,
		Usage: events.TokenUsage{PromptTokens: 2, CompletionTokens: 2, TotalTokens: 4}, Latency: 3 * time.Millisecond, Attempts: 1}
}

func failed(m aggregates.ModelRef, response int64) aggregates.ModelAnswer {
	return aggregates.ModelAnswer{Model: m, ResponseID: response, Text: "ignored", Latency: time.Second, Attempts: 3,
		Error: &events.ModelError{Kind: "upstream", Message: m.Name + " answered 500 Internal Server Error"}}
}

func TestSessionDecisions(t *testing.T) {
	startWith := func(turn aggregates.TurnOutcome) func(aggregates.Session) ([]events.Event, error) {
		return func(s aggregates.Session) ([]events.Event, error) {
			return aggregates.DecideStartSession(s, aggregates.StartSession{SessionID: 9, UserID: 7, ClassID: ptr[int64](3),
				Settings: balanced, Turn: turn})
		}
	}
	hello := aggregates.TurnOutcome{PromptText: "Hello there", Messages: firstTurn.Messages, Params: warmParams,
		Answers: []aggregates.ModelAnswer{answer(echo, 31, "Hello there")}, FreshModelIDs: []int64{21}}
	record := func(c aggregates.RecordTurn) func(aggregates.Session) ([]events.Event, error) {
		return func(s aggregates.Session) ([]events.Event, error) { return aggregates.DecideRecordTurn(s, c) }
	}
	update := func(c aggregates.UpdateSessionSettings) func(aggregates.Session) ([]events.Event, error) {
		return func(s aggregates.Session) ([]events.Event, error) {
			return aggregates.DecideUpdateSessionSettings(s, c)
		}
	}
	withLinks := events.SessionStarted{SessionID: 9, UserID: 7, ClassID: ptr[int64](3), KnowledgeIDs: []int64{}, Title: ptr("t"),
		Settings: events.SessionSettings{SettingID: 5, StylePreset: "accurate", StyleParams: json.RawMessage(`{"format":"prose"}`),
			GenerationParams: events.GenerationParams{Temperature: ptr(0.1)},
			FewShotLinks:     []events.FewShotLink{{LinkID: 41, ExampleID: 100, SortOrder: 0}, {LinkID: 42, ExampleID: 101, SortOrder: 1}}}}
	owns := map[int64]bool{100: true, 101: true, 102: true}

	cases := []struct {
		name    string
		given   []events.Event
		when    func(aggregates.Session) ([]events.Event, error)
		then    []events.Event
		wantErr error
	}{
		{
			name: "start records the session and its first turn; the title is the prompt's",
			when: func(s aggregates.Session) ([]events.Event, error) {
				return aggregates.DecideStartSession(s, aggregates.StartSession{SessionID: 9, UserID: 7, ClassID: ptr[int64](3),
					Settings: balanced, Turn: hello})
			},
			then: []events.Event{started, firstTurn},
		},
		{
			name: "a failed model of a side-by-side turn records its error, not its text; the primary is marked",
			when: startWith(aggregates.TurnOutcome{PromptText: "Hello there", Params: warmParams, Primary: 1,
				Answers:       []aggregates.ModelAnswer{failed(gpt, 31), answer(echo, 32, "Hello there")},
				FreshModelIDs: []int64{21, 22}}),
			then: []events.Event{started, events.SessionTurnRecorded{SessionID: 9, Turn: 1, PromptText: "Hello there", Params: warmParams,
				Results: []events.TurnResult{
					{SessionModelID: 21, ModelID: 3, ModelName: "gpt", Provider: "openai", ProviderModel: ptr("gpt-4o-mini"), ResponseID: 31,
						LatencyMS: 1000, Attempts: 3, Error: &events.ModelError{Kind: "upstream", Message: "gpt answered 500 Internal Server Error"}},
					{SessionModelID: 22, ModelID: 1, ModelName: "echo", Provider: "echo", ResponseID: 32, ResponseText: "Hello there",
						TokenUsage: events.TokenUsage{PromptTokens: 2, CompletionTokens: 2, TotalTokens: 4}, LatencyMS: 3, Attempts: 1, IsPrimary: true},
				}}},
		},
		{
			name:    "a turn every model failed is not recorded",
			when:    startWith(aggregates.TurnOutcome{PromptText: "Hi", Answers: []aggregates.ModelAnswer{failed(gpt, 31), failed(echo, 32)}, FreshModelIDs: []int64{21, 22}}),
			wantErr: derrors.ErrBadGateway,
		},
		{
			name:    "a blank prompt is invalid",
			when:    startWith(aggregates.TurnOutcome{PromptText: " \n", Answers: []aggregates.ModelAnswer{answer(echo, 31, "")}, FreshModelIDs: []int64{21}}),
			wantErr: &derrors.FieldError{},
		},
		{
			name:    "starting twice conflicts",
			given:   []events.Event{started, firstTurn},
			when:    startWith(hello),
			wantErr: derrors.ErrConflict,
		},
		{
			name:  "a next turn keeps the session model ids of known models and takes fresh ones for new models",
			given: []events.Event{started, firstTurn},
			when: record(aggregates.RecordTurn{SessionID: 9, CallerID: 7, AfterTurns: 1, Turn: aggregates.TurnOutcome{
				PromptText: "abc", Params: warmParams, Answers: []aggregates.ModelAnswer{answer(reverse, 33, "cba"), answer(echo, 34, "abc")},
				FreshModelIDs: []int64{23}}}),
			then: []events.Event{events.SessionTurnRecorded{SessionID: 9, Turn: 2, PromptText: "abc", Params: warmParams,
				Results: []events.TurnResult{
					{SessionModelID: 23, ModelID: 2, ModelName: "echo-reverse", Provider: "echo-reverse", ResponseID: 33, ResponseText: "cba",
						TokenUsage: events.TokenUsage{PromptTokens: 2, CompletionTokens: 2, TotalTokens: 4}, LatencyMS: 3, Attempts: 1, IsPrimary: true},
					{SessionModelID: 21, ModelID: 1, ModelName: "echo", Provider: "echo", ResponseID: 34, ResponseText: "abc",
						TokenUsage: events.TokenUsage{PromptTokens: 2, CompletionTokens: 2, TotalTokens: 4}, LatencyMS: 3, Attempts: 1},
				}}},
		},
		{
			name:  "a turn built before another turn landed conflicts",
			given: []events.Event{started, firstTurn, firstTurn},
			when: record(aggregates.RecordTurn{SessionID: 9, CallerID: 7, AfterTurns: 1, Turn: aggregates.TurnOutcome{
				PromptText: "x", Answers: []aggregates.ModelAnswer{answer(echo, 35, "x")}}}),
			wantErr: derrors.ErrConflict,
		},
		{
			name:  "another user's session is not found",
			given: []events.Event{started, firstTurn},
			when: record(aggregates.RecordTurn{SessionID: 9, CallerID: 8, AfterTurns: 1, Turn: aggregates.TurnOutcome{
				PromptText: "x", Answers: []aggregates.ModelAnswer{answer(echo, 35, "x")}}}),
			wantErr: derrors.ErrNotFound,
		},
		{
			name: "a missing session is not found",
			when: record(aggregates.RecordTurn{SessionID: 9, CallerID: 7, Turn: aggregates.TurnOutcome{
				PromptText: "x", Answers: []aggregates.ModelAnswer{answer(echo, 35, "x")}}}),
			wantErr: derrors.ErrNotFound,
		},
		{
			name:  "settings merge: given fields change, omitted ones stay",
			given: []events.Event{withLinks, firstTurn},
			when: update(aggregates.UpdateSessionSettings{SessionID: 9, CallerID: 7, StylePreset: aggregates.Set(ptr("creative")),
				StyleParams: aggregates.Set(map[string]any{"persona": "coach", "format": "prose"})}),
			then: []events.Event{events.SessionSettingsUpdated{SessionID: 9, Changed: []string{"style_preset", "style_params"},
				Settings: events.SessionSettings{SettingID: 5, StylePreset: "creative", StyleParams: json.RawMessage(`{"format":"prose","persona":"coach"}`),
					GenerationParams: events.GenerationParams{Temperature: ptr(0.1)}, FewShotLinks: withLinks.Settings.FewShotLinks}}},
		},
		{
			name:  "null resets each setting to its default",
			given: []events.Event{withLinks},
			when: update(aggregates.UpdateSessionSettings{SessionID: 9, CallerID: 7, StylePreset: aggregates.Set[*string](nil),
				StyleParams: aggregates.Set[map[string]any](nil), GenerationParams: aggregates.Set[*events.GenerationParams](nil),
				FewShotExampleIDs: aggregates.Set[[]int64](nil)}),
			then: []events.Event{events.SessionSettingsUpdated{SessionID: 9,
				Changed:  []string{"style_preset", "style_params", "generation_params", "few_shot_example_ids"},
				Settings: events.SessionSettings{SettingID: 5, StylePreset: "balanced", StyleParams: json.RawMessage(`{}`), FewShotLinks: []events.FewShotLink{}}}},
		},
		{
			name:  "a few-shot list replaces the links in its order; examples that stay keep their link ids",
			given: []events.Event{withLinks},
			when: update(aggregates.UpdateSessionSettings{SessionID: 9, CallerID: 7, FewShotExampleIDs: aggregates.Set([]int64{102, 100}),
				OwnedExamples: owns, FreshLinkIDs: []int64{51, 52}}),
			then: []events.Event{events.SessionSettingsUpdated{SessionID: 9, Changed: []string{"few_shot_example_ids"},
				Settings: events.SessionSettings{SettingID: 5, StylePreset: "accurate", StyleParams: json.RawMessage(`{"format":"prose"}`),
					GenerationParams: events.GenerationParams{Temperature: ptr(0.1)},
					FewShotLinks:     []events.FewShotLink{{LinkID: 51, ExampleID: 102, SortOrder: 0}, {LinkID: 41, ExampleID: 100, SortOrder: 1}}}}},
		},
		{
			name:  "an update that changes nothing records nothing",
			given: []events.Event{withLinks},
			when: update(aggregates.UpdateSessionSettings{SessionID: 9, CallerID: 7, StylePreset: aggregates.Set(ptr("accurate")),
				StyleParams:       aggregates.Set(map[string]any{"format": "prose"}),
				GenerationParams:  aggregates.Set(&events.GenerationParams{Temperature: ptr(0.1)}),
				FewShotExampleIDs: aggregates.Set([]int64{100, 101}), OwnedExamples: owns}),
			then: nil,
		},
		{
			name:  "another user's few-shot example is refused",
			given: []events.Event{withLinks},
			when: update(aggregates.UpdateSessionSettings{SessionID: 9, CallerID: 7, FewShotExampleIDs: aggregates.Set([]int64{100, 999}),
				OwnedExamples: owns, FreshLinkIDs: []int64{51, 52}}),
			wantErr: &derrors.FieldError{},
		},
		{
			name:  "style params past their bound are refused",
			given: []events.Event{withLinks},
			when: update(aggregates.UpdateSessionSettings{SessionID: 9, CallerID: 7,
				StyleParams: aggregates.Set(map[string]any{"persona": strings.Repeat("p", aggregates.MaxStyleParamsBytes)})}),
			wantErr: &derrors.FieldError{},
		},
		{
			name:  "style params at their bound are kept",
			given: []events.Event{withLinks},
			when: update(aggregates.UpdateSessionSettings{SessionID: 9, CallerID: 7,
				StyleParams: aggregates.Set(map[string]any{"p": strings.Repeat("p", aggregates.MaxStyleParamsBytes-len(`{"p":""}`))})}),
			then: []events.Event{events.SessionSettingsUpdated{SessionID: 9, Changed: []string{"style_params"},
				Settings: events.SessionSettings{SettingID: 5, StylePreset: "accurate",
					StyleParams:      json.RawMessage(`{"p":"` + strings.Repeat("p", aggregates.MaxStyleParamsBytes-len(`{"p":""}`)) + `"}`),
					GenerationParams: events.GenerationParams{Temperature: ptr(0.1)}, FewShotLinks: withLinks.Settings.FewShotLinks}}},
		},
		{
			name:    "settings of another user's session are not found",
			given:   []events.Event{withLinks},
			when:    update(aggregates.UpdateSessionSettings{SessionID: 9, CallerID: 8, StylePreset: aggregates.Set(ptr("creative"))}),
			wantErr: derrors.ErrNotFound,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.when(given(aggregates.EvolveSession, tc.given...))
			checkErr(t, err, tc.wantErr)
			if diff := cmp.Diff(tc.then, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEvolveSession(t *testing.T) {
	withLink := started
	withLink.Settings.FewShotLinks = []events.FewShotLink{{LinkID: 41, ExampleID: 100}}
	relinked := withLink.Settings
	relinked.FewShotLinks = []events.FewShotLink{{LinkID: 42, ExampleID: 101}, {LinkID: 41, ExampleID: 100, SortOrder: 1}}
	s := given(aggregates.EvolveSession, withLink, firstTurn,
		events.SessionSettingsUpdated{SessionID: 9, Settings: relinked, Changed: []string{"few_shot_example_ids"}})

	if s.Version != 3 || !s.CreatedAt.Equal(t0) || !s.UpdatedAt.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("version %d, created %s, updated %s", s.Version, s.CreatedAt, s.UpdatedAt)
	}
	if !s.Settings.CreatedAt.Equal(t0) || !s.Settings.UpdatedAt.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("settings created %s, updated %s", s.Settings.CreatedAt, s.Settings.UpdatedAt)
	}
	wantLinks := []aggregates.Link{
		{ID: 42, ExampleID: 101, SortOrder: 0, CreatedAt: t0.Add(2 * time.Minute)},
		{ID: 41, ExampleID: 100, SortOrder: 1, CreatedAt: t0},
	}
	if diff := cmp.Diff(wantLinks, s.Settings.FewShotLinks); diff != "" {
		t.Errorf("links (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]aggregates.SessionModel{{ID: 21, ModelID: 1, Name: "echo"}}, s.Models); diff != "" {
		t.Errorf("models (-want +got):\n%s", diff)
	}
	if len(s.Turns) != 1 || s.Turns[0].Number != 1 || !s.Turns[0].CreatedAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("turns %+v", s.Turns)
	}
}

func TestChooseModels(t *testing.T) {
	catalogue := []aggregates.ModelRef{echo, reverse, gpt}
	class := func(primary *int64, allowed ...int64) aggregates.PracticeClass {
		return aggregates.PracticeClass{ID: 3, PrimaryModelID: primary, AllowedModelIDs: allowed}
	}
	cases := []struct {
		name        string
		choice      aggregates.ModelChoice
		want        []aggregates.ModelRef
		wantPrimary int
		wantFields  []string // field errors, in order
	}{
		{name: "named models, the first is primary", choice: aggregates.ModelChoice{Requested: []string{"echo-reverse", "echo"}},
			want: []aggregates.ModelRef{reverse, echo}},
		{name: "the class's primary model is primary when called", choice: aggregates.ModelChoice{Requested: []string{"echo-reverse", "echo"},
			Class: class(ptr[int64](1))}, want: []aggregates.ModelRef{reverse, echo}, wantPrimary: 1},
		{name: "the class's primary model not called: the first is primary", choice: aggregates.ModelChoice{Requested: []string{"echo-reverse", "gpt"},
			Class: class(ptr[int64](1))}, want: []aggregates.ModelRef{reverse, gpt}},
		{name: "every bad name is reported at its index", choice: aggregates.ModelChoice{Requested: []string{"echo", "nope", "echo", "gpt"},
			Class: class(nil, 1, 2)}, wantFields: []string{"model_names.1", "model_names.2", "model_names.3"}},
		{name: "none named: the class's primary model", choice: aggregates.ModelChoice{Class: class(ptr[int64](2))},
			want: []aggregates.ModelRef{reverse}},
		{name: "none named, no class primary: the catalogue default", choice: aggregates.ModelChoice{Default: echo},
			want: []aggregates.ModelRef{echo}},
		{name: "none named, the default not allowed: the first allowed model", choice: aggregates.ModelChoice{Default: echo, Class: class(nil, 9, 3)},
			want: []aggregates.ModelRef{gpt}},
		{name: "none named and nothing allowed is in the catalogue", choice: aggregates.ModelChoice{Default: echo, Class: class(nil, 9)},
			wantFields: []string{"model_names"}},
		{name: "continuing: the previous turn's models", choice: aggregates.ModelChoice{Previous: []aggregates.ModelRef{gpt, echo},
			Class: class(ptr[int64](1))}, want: []aggregates.ModelRef{gpt, echo}, wantPrimary: 1},
		{name: "continuing: a previous model the class no longer allows", choice: aggregates.ModelChoice{Previous: []aggregates.ModelRef{gpt},
			Class: class(nil, 1)}, wantFields: []string{"model_names"}},
		{name: "continuing with named models", choice: aggregates.ModelChoice{Previous: []aggregates.ModelRef{gpt}, Requested: []string{"echo"}},
			want: []aggregates.ModelRef{echo}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.choice.Catalogue = catalogue
			got, primary, err := aggregates.ChooseModels(tc.choice)
			var fields []string
			for _, e := range flatten(err) {
				var field *derrors.FieldError
				if !errors.As(e, &field) {
					t.Fatalf("error %v is not a field error", e)
				}
				fields = append(fields, field.Field)
			}
			if diff := cmp.Diff(tc.wantFields, fields); diff != "" {
				t.Fatalf("error fields (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got); err == nil && diff != "" {
				t.Errorf("models (-want +got):\n%s", diff)
			}
			if err == nil && primary != tc.wantPrimary {
				t.Errorf("primary %d, want %d", primary, tc.wantPrimary)
			}
		})
	}
}

// An unknown model is a field error of its own kind, worded in the domain's
// terms: the edge adds where the catalogue is listed.
func TestUnknownModelKind(t *testing.T) {
	_, _, err := aggregates.ChooseModels(aggregates.ModelChoice{Catalogue: []aggregates.ModelRef{echo},
		Requested: []string{"echo", "nope"}})
	var field *derrors.FieldError
	if !errors.As(err, &field) {
		t.Fatalf("error %v, want a field error", err)
	}
	want := derrors.FieldError{Kind: aggregates.ErrUnknownModel, Field: "model_names.1", Input: "nope", Msg: "unknown model 'nope'"}
	if diff := cmp.Diff(want, *field, cmp.Comparer(func(a, b error) bool { return errors.Is(a, b) && errors.Is(b, a) })); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !errors.Is(err, aggregates.ErrUnknownModel) {
		t.Errorf("errors.Is(%v, ErrUnknownModel) is false", err)
	}
}

// flatten lists the leaves of joined errors.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

func TestCheckFewShotExamples(t *testing.T) {
	err := aggregates.CheckFewShotExamples([]int64{1, 2, 1, 3}, map[int64]bool{1: true, 3: true})
	var fields []string
	for _, e := range flatten(err) {
		var fe *derrors.FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("%v: not a field error", e)
		}
		fields = append(fields, fe.Field)
	}
	want := []string{"few_shot_example_ids.1", "few_shot_example_ids.2"}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err := aggregates.CheckFewShotExamples(nil, nil); err != nil {
		t.Errorf("no ids: %v", err)
	}
}

func TestCheckPracticeAccess(t *testing.T) {
	for _, ok := range []aggregates.PracticeAccess{{Admin: true}, {Enrolled: true}, {OrgPartner: true}} {
		if err := aggregates.CheckPracticeAccess(ok); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	checkErr(t, aggregates.CheckPracticeAccess(aggregates.PracticeAccess{}), derrors.ErrForbidden)
	// An ended class takes no turns from anyone who could practise in it;
	// to anyone else it says no more than before.
	for _, ended := range []aggregates.PracticeAccess{{Admin: true, Ended: true}, {Enrolled: true, Ended: true}, {OrgPartner: true, Ended: true}} {
		checkErr(t, aggregates.CheckPracticeAccess(ended), derrors.ErrConflict)
	}
	checkErr(t, aggregates.CheckPracticeAccess(aggregates.PracticeAccess{Ended: true}), derrors.ErrForbidden)
}

func TestSessionTitle(t *testing.T) {
	long := strings.Repeat("word ", 20)
	cases := []struct{ prompt, want string }{
		{"Hello there", "Hello there"},
		{"  spaced\n\tout   prompt ", "spaced out prompt"},
		{long, strings.TrimSpace(strings.Repeat("word ", 12))}, // 59 characters; a 13th word would make 64
		{strings.Repeat("x", 70), strings.Repeat("x", 60)},
		{strings.Repeat("é", 59) + " and more", strings.Repeat("é", 59)},
		{strings.Repeat("a", 55) + " four", strings.Repeat("a", 55) + " four"}, // exactly 60
	}
	for _, tc := range cases {
		if got := aggregates.SessionTitle(tc.prompt); got != tc.want {
			t.Errorf("SessionTitle(%q) = %q, want %q", tc.prompt, got, tc.want)
		}
	}
}

// turnOf is a recorded turn n whose prompt and primary answer are prompt,
// and which sent only its prompt besides the history.
func turnOf(n int, prompt string) events.SessionTurnRecorded {
	return events.SessionTurnRecorded{SessionID: 9, Turn: n, PromptText: prompt,
		Messages: []events.ChatMessage{{Role: "user", Content: prompt}},
		Results:  []events.TurnResult{{SessionModelID: 21, ModelID: 1, ModelName: "echo", ResponseText: prompt, IsPrimary: true}}}
}

// sessionOf is the session that evs make.
func sessionOf(evs ...events.Event) aggregates.Session {
	return given(aggregates.EvolveSession, evs...)
}

// A session counts the text its turns record (prompt, messages, answers,
// errors), and refuses a turn once that and the turn's prompt pass
// MaxSessionText.
func TestSessionTextIsBounded(t *testing.T) {
	s := sessionOf(started, firstTurn)
	if want := 3 * len("Hello there"); s.Text != want {
		t.Errorf("Text after the first turn = %d, want %d (prompt, message, answer)", s.Text, want)
	}
	big := strings.Repeat("x", 1<<20) // a megabyte, three times per turn
	evs := []events.Event{started}
	for n := 1; n <= 4; n++ {
		evs = append(evs, turnOf(n, big))
	}
	s = sessionOf(evs...)
	if want := 12 << 20; s.Text != want {
		t.Fatalf("Text = %d, want %d", s.Text, want)
	}
	next := aggregates.RecordTurn{SessionID: 9, CallerID: 7, AfterTurns: 4, Turn: aggregates.TurnOutcome{PromptText: "one more",
		Answers: []aggregates.ModelAnswer{answer(echo, 40, "one more")}}}
	if _, err := aggregates.DecideRecordTurn(s, next); !errors.Is(err, derrors.ErrConflict) {
		t.Errorf("a turn of a session past MaxSessionText: %v, want a conflict", err)
	}
	if err := aggregates.CheckSessionRoom(s, "one more"); !errors.Is(err, derrors.ErrConflict) {
		t.Errorf("CheckSessionRoom past MaxSessionText: %v, want a conflict", err)
	}
	roomy := sessionOf(started, turnOf(1, strings.Repeat("x", aggregates.MaxSessionText/3-10)))
	room := aggregates.MaxSessionText - roomy.Text
	if err := aggregates.CheckSessionRoom(roomy, strings.Repeat("y", room)); err != nil {
		t.Errorf("a prompt that just fits: %v", err)
	}
	if err := aggregates.CheckSessionRoom(roomy, strings.Repeat("y", room+1)); !errors.Is(err, derrors.ErrConflict) {
		t.Errorf("a prompt one byte too long: %v, want a conflict", err)
	}
}

// The history a turn sends is the most recent turns whose prompts and
// primary answers fit the window: a failed primary answer counts nothing,
// and a last turn that does not fit alone leaves none.
func TestHistoryWindow(t *testing.T) {
	turns := sessionOf(started, turnOf(1, "aaaa"), turnOf(2, "bb"), turnOf(3, "c")).Turns
	for _, c := range []struct {
		max  int
		want []int // the turns' numbers
	}{
		{0, nil}, {1, nil}, {2, []int{3}}, {5, []int{3}}, {6, []int{2, 3}}, {13, []int{2, 3}}, {14, []int{1, 2, 3}}, {1 << 20, []int{1, 2, 3}},
	} {
		var got []int
		for _, turn := range aggregates.HistoryWindow(turns, c.max) {
			got = append(got, turn.Number)
		}
		if !cmp.Equal(got, c.want) {
			t.Errorf("HistoryWindow(max %d) = turns %v, want %v", c.max, got, c.want)
		}
	}
	failedTurn := turnOf(1, "aaaa")
	failedTurn.Results[0].Error = &events.ModelError{Kind: "upstream", Message: "down"}
	turns = sessionOf(started, failedTurn, turnOf(2, "c")).Turns
	if got := aggregates.HistoryWindow(turns, 6); len(got) != 2 {
		t.Errorf("a window of 6 over a failed turn of a 4-byte prompt and a turn of 2: %d turns, want both", len(got))
	}
}

// A new session may not name an agent its owner switched off.
func TestCheckSessionAgent(t *testing.T) {
	if err := aggregates.CheckSessionAgent(3, true); err != nil {
		t.Errorf("an active agent: %v", err)
	}
	var fe *derrors.FieldError
	if err := aggregates.CheckSessionAgent(3, false); !errors.As(err, &fe) || fe.Field != "agent_id" ||
		fe.Msg != "agent 3 is inactive: activate it, or choose another" {
		t.Errorf("an inactive agent: %v, want a field error at agent_id", err)
	}
}
