package aggregates

import (
	"slices"
	"time"

	"lectern/derrors"
	"lectern/events"
)

// Roles.
const (
	RoleUser      = "user"
	RoleAdmin     = "admin"
	RolePartner   = "partner"
	RoleAssistant = "assistant"
)

// User is an account.
type User struct {
	ID    int64
	Email string
	Name  string
	Roles []string
	// Erased: the user's personal data was erased; the account is gone.
	Erased    bool
	CreatedAt time.Time
	UpdatedAt time.Time
	Version   int64
}

// Exists reports whether the user signed up.
func (u User) Exists() bool { return u.Version > 0 }

// HasRole reports whether u holds role.
func (u User) HasRole(role string) bool { return slices.Contains(u.Roles, role) }

// EvolveUser applies one event.
func EvolveUser(u User, env events.Envelope) User {
	switch e := env.Event.(type) {
	case events.UserSignedUp:
		u = User{ID: e.UserID, Email: e.Email, Name: e.Name, Roles: slices.Clone(e.Roles), CreatedAt: env.RecordedAt}
	case events.UserRoleGranted:
		if !slices.Contains(u.Roles, e.Role) {
			u.Roles = append(slices.Clone(u.Roles), e.Role)
		}
	case events.UserErased:
		u.Erased = true
	}
	u.UpdatedAt = env.RecordedAt
	u.Version = env.Version
	return u
}

// SignUp is the command to create an account. The e-mail's uniqueness is
// claimed, and the password's hash stored with the credentials, by the
// command handler before deciding: no secret enters the event.
type SignUp struct {
	UserID int64
	Email  string
	Name   string
	Admin  bool
}

// DecideSignUp creates the account with the user role (and admin if asked).
func DecideSignUp(u User, c SignUp) ([]events.Event, error) {
	if u.Exists() {
		return nil, derrors.New(derrors.ErrConflict, "User already exists")
	}
	roles := []string{RoleUser}
	if c.Admin {
		roles = append(roles, RoleAdmin)
	}
	return []events.Event{events.UserSignedUp{
		UserID: c.UserID, Email: c.Email, Name: c.Name, Roles: roles,
	}}, nil
}

// DecideGrantRole grants role unless the user holds it already.
func DecideGrantRole(u User, role string) ([]events.Event, error) {
	if !u.Exists() || u.Erased {
		return nil, derrors.New(derrors.ErrNotFound, "User not found")
	}
	if u.HasRole(role) {
		return nil, nil
	}
	return []events.Event{events.UserRoleGranted{UserID: u.ID, Role: role}}, nil
}

// DecideChangePassword records a password change. The command handler
// checks the current password and stores the new hash before deciding: no
// secret enters the event.
func DecideChangePassword(u User) ([]events.Event, error) {
	if !u.Exists() || u.Erased {
		return nil, derrors.New(derrors.ErrNotFound, "User not found")
	}
	return []events.Event{events.UserPasswordChanged{UserID: u.ID}}, nil
}

// DecideErase records that the user's personal data was erased, by actor
// (the user, or an admin). Erasing an erased user records nothing again.
func DecideErase(u User, actor int64) ([]events.Event, error) {
	if !u.Exists() {
		return nil, derrors.New(derrors.ErrNotFound, "User not found")
	}
	if u.Erased {
		return nil, nil
	}
	return []events.Event{events.UserErased{UserID: u.ID, Actor: actor}}, nil
}
