package aggregates_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"lectern/aggregates"
	"lectern/derrors"
	"lectern/events"
)

var exampleCreated = events.FewShotCreated{ExampleID: 5, UserID: 7, InputText: "2+2?", OutputText: "4",
	Meta: json.RawMessage(`{}`), IsActive: true}

func TestFewShotExampleDecisions(t *testing.T) {
	withEverything := events.FewShotCreated{ExampleID: 5, UserID: 7, Title: ptr("sums"), InputText: "2+2?", OutputText: "4",
		Meta: json.RawMessage(`{"level":2,"tags":["math"]}`), IsActive: false}
	create := func(c aggregates.CreateFewShotExample) func(aggregates.FewShotExample) ([]events.Event, error) {
		return func(x aggregates.FewShotExample) ([]events.Event, error) {
			return aggregates.DecideCreateFewShotExample(x, c)
		}
	}
	update := func(c aggregates.UpdateFewShotExample) func(aggregates.FewShotExample) ([]events.Event, error) {
		if c.ExampleID == 0 {
			c.ExampleID = 5
		}
		if c.CallerID == 0 {
			c.CallerID = 7
		}
		return func(x aggregates.FewShotExample) ([]events.Event, error) {
			return aggregates.DecideUpdateFewShotExample(x, c)
		}
	}
	cases := []struct {
		name    string
		given   []events.Event
		when    func(aggregates.FewShotExample) ([]events.Event, error)
		then    []events.Event
		wantErr error
	}{
		{
			name: "create defaults meta to {} and is_active to true",
			when: create(aggregates.CreateFewShotExample{ExampleID: 5, OwnerID: 7, InputText: "2+2?", OutputText: "4"}),
			then: []events.Event{exampleCreated},
		},
		{
			name: "create keeps every given field; meta in canonical form",
			when: create(aggregates.CreateFewShotExample{ExampleID: 5, OwnerID: 7, Title: ptr("sums"), InputText: "2+2?", OutputText: "4",
				Meta: map[string]any{"tags": []any{"math"}, "level": json.Number("2")}, IsActive: ptr(false)}),
			then: []events.Event{withEverything},
		},
		{
			name: "create keeps an empty meta object",
			when: create(aggregates.CreateFewShotExample{ExampleID: 5, OwnerID: 7, InputText: "a", OutputText: "b", Meta: map[string]any{}}),
			then: []events.Event{events.FewShotCreated{ExampleID: 5, UserID: 7, InputText: "a", OutputText: "b",
				Meta: json.RawMessage(`{}`), IsActive: true}},
		},
		{
			name:    "create twice conflicts",
			given:   []events.Event{exampleCreated},
			when:    create(aggregates.CreateFewShotExample{ExampleID: 5, OwnerID: 7, InputText: "a", OutputText: "b"}),
			wantErr: derrors.ErrConflict,
		},
		{
			name:    "a blank input_text is invalid",
			when:    create(aggregates.CreateFewShotExample{ExampleID: 5, OwnerID: 7, InputText: " \n", OutputText: "b"}),
			wantErr: &derrors.FieldError{Field: "input_text"},
		},
		{
			name:    "a blank output_text is invalid",
			when:    create(aggregates.CreateFewShotExample{ExampleID: 5, OwnerID: 7, InputText: "a", OutputText: "\t"}),
			wantErr: &derrors.FieldError{Field: "output_text"},
		},
		{
			name:    "a NUL character in a text is invalid",
			when:    create(aggregates.CreateFewShotExample{ExampleID: 5, OwnerID: 7, InputText: "a\x00b", OutputText: "b"}),
			wantErr: &derrors.FieldError{Field: "input_text"},
		},
		{
			name:    "a NUL character in the title is invalid",
			when:    create(aggregates.CreateFewShotExample{ExampleID: 5, OwnerID: 7, Title: ptr("\x00"), InputText: "a", OutputText: "b"}),
			wantErr: &derrors.FieldError{Field: "title"},
		},
		{
			name:  "update records only changed fields and the full new state",
			given: []events.Event{withEverything},
			when: update(aggregates.UpdateFewShotExample{InputText: aggregates.Set("3+3?"), OutputText: aggregates.Set("4"),
				Title: aggregates.Set(ptr("sums"))}),
			then: []events.Event{events.FewShotUpdated{ExampleID: 5, Title: ptr("sums"), InputText: "3+3?", OutputText: "4",
				Meta: json.RawMessage(`{"level":2,"tags":["math"]}`), IsActive: false, Changed: []string{"input_text"}}},
		},
		{
			name:  "update sets every field",
			given: []events.Event{exampleCreated},
			when: update(aggregates.UpdateFewShotExample{Title: aggregates.Set(ptr("t")), InputText: aggregates.Set("i"),
				OutputText: aggregates.Set("o"), Meta: aggregates.Set(map[string]any{"k": "v"}), IsActive: aggregates.Set(ptr(false))}),
			then: []events.Event{events.FewShotUpdated{ExampleID: 5, Title: ptr("t"), InputText: "i", OutputText: "o",
				Meta: json.RawMessage(`{"k":"v"}`), IsActive: false,
				Changed: []string{"title", "input_text", "output_text", "meta", "is_active"}}},
		},
		{
			name:  "null resets title to null, meta to {} and is_active to true",
			given: []events.Event{withEverything},
			when: update(aggregates.UpdateFewShotExample{Title: aggregates.Set[*string](nil), Meta: aggregates.Set[map[string]any](nil),
				IsActive: aggregates.Set[*bool](nil)}),
			then: []events.Event{events.FewShotUpdated{ExampleID: 5, InputText: "2+2?", OutputText: "4",
				Meta: json.RawMessage(`{}`), IsActive: true, Changed: []string{"title", "meta", "is_active"}}},
		},
		{
			name:  "resetting fields already at their defaults records nothing",
			given: []events.Event{exampleCreated},
			when: update(aggregates.UpdateFewShotExample{Title: aggregates.Set[*string](nil), Meta: aggregates.Set[map[string]any](nil),
				IsActive: aggregates.Set[*bool](nil)}),
			then: nil,
		},
		{
			name:  "an update that changes nothing records nothing",
			given: []events.Event{withEverything},
			when: update(aggregates.UpdateFewShotExample{Title: aggregates.Set(ptr("sums")), InputText: aggregates.Set("2+2?"),
				OutputText: aggregates.Set("4"), Meta: aggregates.Set(map[string]any{"level": json.Number("2"), "tags": []any{"math"}}),
				IsActive: aggregates.Set(ptr(false))}),
			then: nil,
		},
		{
			name:  "an empty update records nothing",
			given: []events.Event{withEverything},
			when:  update(aggregates.UpdateFewShotExample{}),
			then:  nil,
		},
		{
			name: "meta is compared as JSON, not as stored text",
			given: []events.Event{events.FewShotCreated{ExampleID: 5, UserID: 7, InputText: "a", OutputText: "b",
				Meta: json.RawMessage(`{ "b": 1, "a": [true] }`), IsActive: true}},
			when: update(aggregates.UpdateFewShotExample{Meta: aggregates.Set(map[string]any{"a": []any{true}, "b": json.Number("1")})}),
			then: nil,
		},
		{
			name:  "meta is replaced, not merged",
			given: []events.Event{withEverything},
			when:  update(aggregates.UpdateFewShotExample{Meta: aggregates.Set(map[string]any{"level": json.Number("3")})}),
			then: []events.Event{events.FewShotUpdated{ExampleID: 5, Title: ptr("sums"), InputText: "2+2?", OutputText: "4",
				Meta: json.RawMessage(`{"level":3}`), IsActive: false, Changed: []string{"meta"}}},
		},
		{
			name:    "update refuses a blank text",
			given:   []events.Event{exampleCreated},
			when:    update(aggregates.UpdateFewShotExample{OutputText: aggregates.Set("  ")}),
			wantErr: &derrors.FieldError{Field: "output_text"},
		},
		{
			name:    "update refuses a NUL character",
			given:   []events.Event{exampleCreated},
			when:    update(aggregates.UpdateFewShotExample{Title: aggregates.Set(ptr("a\x00"))}),
			wantErr: &derrors.FieldError{Field: "title"},
		},
		{
			name:    "another user's example is not found",
			given:   []events.Event{exampleCreated},
			when:    update(aggregates.UpdateFewShotExample{CallerID: 8, InputText: aggregates.Set("mine")}),
			wantErr: derrors.ErrNotFound,
		},
		{
			name:    "another user's example is not found, even for an update that changes nothing",
			given:   []events.Event{exampleCreated},
			when:    update(aggregates.UpdateFewShotExample{CallerID: 8}),
			wantErr: derrors.ErrNotFound,
		},
		{
			name:    "a missing example is not found",
			when:    update(aggregates.UpdateFewShotExample{InputText: aggregates.Set("x")}),
			wantErr: derrors.ErrNotFound,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.when(given(aggregates.EvolveFewShotExample, tc.given...))
			checkErr(t, err, tc.wantErr)
			var want, field *derrors.FieldError
			if errors.As(tc.wantErr, &want) && errors.As(err, &field) {
				if diff := cmp.Diff(want.Field, field.Field); diff != "" {
					t.Errorf("error field (-want +got):\n%s", diff)
				}
			}
			if diff := cmp.Diff(tc.then, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEvolveFewShotExample(t *testing.T) {
	x := given(aggregates.EvolveFewShotExample, exampleCreated,
		events.FewShotUpdated{ExampleID: 5, Title: ptr("t"), InputText: "i", OutputText: "o", Meta: json.RawMessage(`{"k":1}`),
			IsActive: false, Changed: []string{"title", "input_text", "output_text", "meta", "is_active"}})
	want := aggregates.FewShotExample{ID: 5, OwnerID: 7, Title: ptr("t"), InputText: "i", OutputText: "o",
		Meta: json.RawMessage(`{"k":1}`), IsActive: false, CreatedAt: t0, UpdatedAt: t0.Add(time.Minute), Version: 2}
	if diff := cmp.Diff(want, x); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
}
