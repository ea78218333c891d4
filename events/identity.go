package events

import "encoding/json"

// Stream categories of identity.
const CategoryUser = "user"

// UserSignedUp: a person created an account (or an operator created one).
// Its password hash is not part of it (the credentials table holds it);
// version 1 carried one (password_hash), which upcasting drops.
type UserSignedUp struct {
	UserID int64    `json:"user_id"`
	Email  string   `json:"email"`
	Name   string   `json:"name"`
	Roles  []string `json:"roles"`
}

// UserRoleGranted: a user received a role (admin, partner, assistant).
type UserRoleGranted struct {
	UserID int64  `json:"user_id"`
	Role   string `json:"role"`
}

// EventType implements Event.
func (UserSignedUp) EventType() string { return "user.signed_up" }

// SchemaVersion implements Event.
func (UserSignedUp) SchemaVersion() int { return 2 }

// dropPasswordHash upcasts user.signed_up from version 1: the hash leaves.
func dropPasswordHash(data json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	delete(m, "password_hash")
	return json.Marshal(m)
}

// UserErased: a user's personal data was erased (GDPR art. 17): their data
// key is gone, so every personal field of their events reads as its
// placeholder, and read models anonymise their rows. It holds no personal
// data; Actor says who erased (the user, or an admin's user id).
type UserErased struct {
	UserID int64 `json:"user_id"`
	Actor  int64 `json:"actor"`
}

// EventType implements Event.
func (UserErased) EventType() string { return "user.erased" }

// SchemaVersion implements Event.
func (UserErased) SchemaVersion() int { return 1 }

// UserPasswordChanged: a user changed their password. It holds neither the
// password nor its hash (the credentials table holds the hash): the history
// records that and when it changed, never a secret.
type UserPasswordChanged struct {
	UserID int64 `json:"user_id"`
}

// EventType implements Event.
func (UserPasswordChanged) EventType() string { return "user.password_changed" }

// SchemaVersion implements Event.
func (UserPasswordChanged) SchemaVersion() int { return 1 }

// EventType implements Event.
func (UserRoleGranted) EventType() string { return "user.role_granted" }

// SchemaVersion implements Event.
func (UserRoleGranted) SchemaVersion() int { return 1 }

var (
	_ Event = UserSignedUp{}
	_ Event = UserRoleGranted{}
	_ Event = UserErased{}
	_ Event = UserPasswordChanged{}
)
