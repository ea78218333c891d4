package aggregates_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"lectern/aggregates"
	"lectern/derrors"
	"lectern/events"
)

func ptr[T any](v T) *T { return &v }

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// given folds events into state, as the command runner does.
func given[S any](evolve func(S, events.Envelope) S, evs ...events.Event) S {
	var s S
	for i, e := range evs {
		s = evolve(s, events.Envelope{Meta: events.Meta{Version: int64(i + 1), RecordedAt: t0.Add(time.Duration(i) * time.Minute)}, Event: e})
	}
	return s
}

var created = events.AgentCreated{AgentID: 3, OwnerID: 7, Name: "Tutor", SystemPrompt: "Be kind", IsActive: true}

func TestAgentDecisions(t *testing.T) {
	cases := []struct {
		name    string
		given   []events.Event
		when    func(aggregates.Agent) ([]events.Event, error)
		then    []events.Event
		wantErr error
	}{
		{
			name: "create defaults is_active to true",
			when: func(a aggregates.Agent) ([]events.Event, error) {
				return aggregates.DecideCreateAgent(a, aggregates.CreateAgent{AgentID: 3, OwnerID: 7, Name: "Tutor", SystemPrompt: "Be kind"})
			},
			then: []events.Event{created},
		},
		{
			name: "create keeps an explicit inactive flag and optional fields",
			when: func(a aggregates.Agent) ([]events.Event, error) {
				return aggregates.DecideCreateAgent(a, aggregates.CreateAgent{AgentID: 3, OwnerID: 7, Name: "T", SystemPrompt: "p",
					RoleDescription: ptr("coach"), TemplateSource: ptr("lib"), IsActive: ptr(false)})
			},
			then: []events.Event{events.AgentCreated{AgentID: 3, OwnerID: 7, Name: "T", SystemPrompt: "p",
				RoleDescription: ptr("coach"), TemplateSource: ptr("lib"), IsActive: false}},
		},
		{
			name:  "create twice conflicts",
			given: []events.Event{created},
			when: func(a aggregates.Agent) ([]events.Event, error) {
				return aggregates.DecideCreateAgent(a, aggregates.CreateAgent{AgentID: 3, OwnerID: 7, Name: "x", SystemPrompt: "y"})
			},
			wantErr: derrors.ErrConflict,
		},
		{
			name: "blank name is invalid",
			when: func(a aggregates.Agent) ([]events.Event, error) {
				return aggregates.DecideCreateAgent(a, aggregates.CreateAgent{AgentID: 3, OwnerID: 7, Name: "  ", SystemPrompt: "y"})
			},
			wantErr: &derrors.FieldError{},
		},
		{
			name:  "update records only changed fields and the full new state",
			given: []events.Event{created},
			when: func(a aggregates.Agent) ([]events.Event, error) {
				return aggregates.DecideUpdateAgent(a, aggregates.UpdateAgent{AgentID: 3, CallerID: 7,
					Name: aggregates.Set("Coach"), SystemPrompt: aggregates.Set("Be kind"), RoleDescription: aggregates.Set(ptr("mentor"))})
			},
			then: []events.Event{events.AgentUpdated{AgentID: 3, Name: "Coach", SystemPrompt: "Be kind",
				RoleDescription: ptr("mentor"), IsActive: true, Changed: []string{"name", "role_description"}}},
		},
		{
			name: "update resets a nullable field with null",
			given: []events.Event{events.AgentCreated{AgentID: 3, OwnerID: 7, Name: "T", SystemPrompt: "p",
				RoleDescription: ptr("coach"), IsActive: true}},
			when: func(a aggregates.Agent) ([]events.Event, error) {
				return aggregates.DecideUpdateAgent(a, aggregates.UpdateAgent{AgentID: 3, CallerID: 7, RoleDescription: aggregates.Set[*string](nil)})
			},
			then: []events.Event{events.AgentUpdated{AgentID: 3, Name: "T", SystemPrompt: "p", IsActive: true, Changed: []string{"role_description"}}},
		},
		{
			name:  "an update that changes nothing records nothing",
			given: []events.Event{created},
			when: func(a aggregates.Agent) ([]events.Event, error) {
				return aggregates.DecideUpdateAgent(a, aggregates.UpdateAgent{AgentID: 3, CallerID: 7, Name: aggregates.Set("Tutor"), IsActive: aggregates.Set(true)})
			},
			then: nil,
		},
		{
			name:  "another user's agent is not found",
			given: []events.Event{created},
			when: func(a aggregates.Agent) ([]events.Event, error) {
				return aggregates.DecideUpdateAgent(a, aggregates.UpdateAgent{AgentID: 3, CallerID: 8, Name: aggregates.Set("Mine")})
			},
			wantErr: derrors.ErrNotFound,
		},
		{
			name: "a missing agent is not found",
			when: func(a aggregates.Agent) ([]events.Event, error) {
				return aggregates.DecideUpdateAgent(a, aggregates.UpdateAgent{AgentID: 3, CallerID: 7, Name: aggregates.Set("x")})
			},
			wantErr: derrors.ErrNotFound,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.when(given(aggregates.EvolveAgent, tc.given...))
			checkErr(t, err, tc.wantErr)
			if diff := cmp.Diff(tc.then, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func checkErr(t *testing.T, err, want error) {
	t.Helper()
	var field *derrors.FieldError
	switch {
	case want == nil && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want == nil:
	case errors.As(want, &field):
		at := field.Field // "": any field
		if !errors.As(err, &field) {
			t.Fatalf("error %v, want a field error", err)
		}
		if at != "" && field.Field != at {
			t.Fatalf("error %v at %s, want one at %s", err, field.Field, at)
		}
	case !errors.Is(err, want):
		t.Fatalf("error %v, want %v", err, want)
	}
}

func TestEvolveAgentTimestamps(t *testing.T) {
	a := given(aggregates.EvolveAgent, created, events.AgentUpdated{AgentID: 3, Name: "B", SystemPrompt: "p", IsActive: false, Changed: []string{"name"}})
	want := aggregates.Agent{ID: 3, OwnerID: 7, Name: "B", SystemPrompt: "p", IsActive: false,
		CreatedAt: t0, UpdatedAt: t0.Add(time.Minute), Version: 2}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
}

func TestUserDecisions(t *testing.T) {
	signedUp := events.UserSignedUp{UserID: 1, Email: "a@b.c", Name: "A", Roles: []string{"user"}}
	t.Run("sign-up gives the user role", func(t *testing.T) {
		got, err := aggregates.DecideSignUp(aggregates.User{}, aggregates.SignUp{UserID: 1, Email: "a@b.c", Name: "A"})
		checkErr(t, err, nil)
		if diff := cmp.Diff([]events.Event{signedUp}, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("an admin sign-up gives both roles", func(t *testing.T) {
		got, _ := aggregates.DecideSignUp(aggregates.User{}, aggregates.SignUp{UserID: 1, Email: "a@b.c", Name: "A", Admin: true})
		if diff := cmp.Diff([]string{"user", "admin"}, got[0].(events.UserSignedUp).Roles); diff != "" {
			t.Errorf("roles (-want +got):\n%s", diff)
		}
	})
	t.Run("signing up twice conflicts", func(t *testing.T) {
		_, err := aggregates.DecideSignUp(given(aggregates.EvolveUser, signedUp), aggregates.SignUp{UserID: 1})
		checkErr(t, err, derrors.ErrConflict)
	})
	t.Run("granting a held role records nothing", func(t *testing.T) {
		got, err := aggregates.DecideGrantRole(given(aggregates.EvolveUser, signedUp), "user")
		checkErr(t, err, nil)
		if got != nil {
			t.Errorf("events %v, want none", got)
		}
	})
	t.Run("granting a new role", func(t *testing.T) {
		u := given(aggregates.EvolveUser, signedUp)
		got, _ := aggregates.DecideGrantRole(u, "admin")
		u = given(aggregates.EvolveUser, signedUp, got[0])
		if !u.HasRole("admin") || !u.HasRole("user") {
			t.Errorf("roles %v", u.Roles)
		}
	})
	t.Run("granting to a missing user", func(t *testing.T) {
		_, err := aggregates.DecideGrantRole(aggregates.User{}, "admin")
		checkErr(t, err, derrors.ErrNotFound)
	})
	t.Run("erasing records who erased", func(t *testing.T) {
		got, err := aggregates.DecideErase(given(aggregates.EvolveUser, signedUp), 9)
		checkErr(t, err, nil)
		if diff := cmp.Diff([]events.Event{events.UserErased{UserID: 1, Actor: 9}}, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("erasing twice records nothing", func(t *testing.T) {
		got, err := aggregates.DecideErase(given(aggregates.EvolveUser, signedUp, events.UserErased{UserID: 1, Actor: 1}), 1)
		checkErr(t, err, nil)
		if got != nil {
			t.Errorf("events %v, want none", got)
		}
	})
	t.Run("erasing a missing user", func(t *testing.T) {
		_, err := aggregates.DecideErase(aggregates.User{}, 1)
		checkErr(t, err, derrors.ErrNotFound)
	})
	t.Run("an erased user gets no role", func(t *testing.T) {
		_, err := aggregates.DecideGrantRole(given(aggregates.EvolveUser, signedUp, events.UserErased{UserID: 1, Actor: 1}), "admin")
		checkErr(t, err, derrors.ErrNotFound)
	})
	t.Run("a password change records no secret", func(t *testing.T) {
		got, err := aggregates.DecideChangePassword(given(aggregates.EvolveUser, signedUp))
		checkErr(t, err, nil)
		if diff := cmp.Diff([]events.Event{events.UserPasswordChanged{UserID: 1}}, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("a missing or erased user changes no password", func(t *testing.T) {
		_, err := aggregates.DecideChangePassword(aggregates.User{})
		checkErr(t, err, derrors.ErrNotFound)
		_, err = aggregates.DecideChangePassword(given(aggregates.EvolveUser, signedUp, events.UserErased{UserID: 1, Actor: 1}))
		checkErr(t, err, derrors.ErrNotFound)
	})
}
