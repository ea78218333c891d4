package events

// Stream categories of identity.
const CategoryUser = "user"

// UserSignedUp: a person created an account (or an operator created one).
type UserSignedUp struct {
	UserID       int64    `json:"user_id"`
	Email        string   `json:"email"`
	Name         string   `json:"name"`
	PasswordHash string   `json:"password_hash"`
	Roles        []string `json:"roles"`
}

// UserRoleGranted: a user received a role (admin, partner, assistant).
type UserRoleGranted struct {
	UserID int64  `json:"user_id"`
	Role   string `json:"role"`
}

// EventType implements Event.
func (UserSignedUp) EventType() string { return "user.signed_up" }

// SchemaVersion implements Event.
func (UserSignedUp) SchemaVersion() int { return 1 }

// EventType implements Event.
func (UserRoleGranted) EventType() string { return "user.role_granted" }

// SchemaVersion implements Event.
func (UserRoleGranted) SchemaVersion() int { return 1 }

var (
	_ Event = UserSignedUp{}
	_ Event = UserRoleGranted{}
)
