package events

import "time"

// Stream categories of the classroom.
const (
	CategoryCourse     = "course"
	CategoryClass      = "class"
	CategoryEnrollment = "enrollment"
)

// Classroom events are subscribed to by downstream systems (DESIGN §9), so
// every payload is complete on its own: ids, the organisation, the new
// values, and who acted. docs/events.md documents each of them.

// CourseCreated: a partner created a course in their organisation.
type CourseCreated struct {
	CourseID    int64   `json:"course_id"`
	OrgID       int64   `json:"org_id"`
	PartnerID   int64   `json:"partner_id"`
	Title       string  `json:"title"`
	CourseKey   string  `json:"course_key"`
	Status      string  `json:"status"`
	StartDate   *string `json:"start_date"` // a calendar date, YYYY-MM-DD
	EndDate     *string `json:"end_date"`
	Description *string `json:"description"`
	CreatedBy   int64   `json:"created_by"` // the acting user
}

// CourseUpdated: a course's fields other than its status were edited. It
// carries every editable field's new value and which of them changed.
type CourseUpdated struct {
	CourseID    int64    `json:"course_id"`
	OrgID       int64    `json:"org_id"`
	Title       string   `json:"title"`
	CourseKey   string   `json:"course_key"`
	StartDate   *string  `json:"start_date"`
	EndDate     *string  `json:"end_date"`
	Description *string  `json:"description"`
	Changed     []string `json:"changed"`
	UpdatedBy   int64    `json:"updated_by"`
}

// CourseStatusChanged: a course moved forward through draft → active → archived.
type CourseStatusChanged struct {
	CourseID  int64  `json:"course_id"`
	OrgID     int64  `json:"org_id"`
	From      string `json:"from"`
	To        string `json:"to"`
	ChangedBy int64  `json:"changed_by"`
}

// ClassCreated: a partner created a class. Its default invite codes follow
// as InviteCodeIssued events in the same append.
type ClassCreated struct {
	ClassID         int64      `json:"class_id"`
	OrgID           int64      `json:"org_id"`
	PartnerID       int64      `json:"partner_id"`
	CourseID        *int64     `json:"course_id"`
	Name            string     `json:"name"`
	Description     *string    `json:"description"`
	Status          string     `json:"status"`
	StartAt         *time.Time `json:"start_at"`
	EndAt           *time.Time `json:"end_at"`
	Capacity        *int64     `json:"capacity"`
	Timezone        *string    `json:"timezone"`
	Location        *string    `json:"location"`
	OnlineURL       *string    `json:"online_url"`
	InviteOnly      bool       `json:"invite_only"`
	PrimaryModelID  *int64     `json:"primary_model_id"`
	AllowedModelIDs []int64    `json:"allowed_model_ids"`
	CreatedBy       int64      `json:"created_by"`
}

// ClassUpdated: a class's fields other than its status were edited. It
// carries every editable field's new value and which of them changed.
type ClassUpdated struct {
	ClassID         int64      `json:"class_id"`
	OrgID           int64      `json:"org_id"`
	CourseID        *int64     `json:"course_id"`
	Name            string     `json:"name"`
	Description     *string    `json:"description"`
	StartAt         *time.Time `json:"start_at"`
	EndAt           *time.Time `json:"end_at"`
	Capacity        *int64     `json:"capacity"`
	Timezone        *string    `json:"timezone"`
	Location        *string    `json:"location"`
	OnlineURL       *string    `json:"online_url"`
	InviteOnly      bool       `json:"invite_only"`
	PrimaryModelID  *int64     `json:"primary_model_id"`
	AllowedModelIDs []int64    `json:"allowed_model_ids"`
	Changed         []string   `json:"changed"`
	UpdatedBy       int64      `json:"updated_by"`
}

// ClassStatusChanged: a class moved forward through planned → active → ended.
type ClassStatusChanged struct {
	ClassID   int64  `json:"class_id"`
	OrgID     int64  `json:"org_id"`
	From      string `json:"from"`
	To        string `json:"to"`
	ChangedBy int64  `json:"changed_by"`
}

// InviteCodeIssued: a class received an invite code.
type InviteCodeIssued struct {
	ClassID      int64     `json:"class_id"`
	OrgID        int64     `json:"org_id"`
	PartnerID    int64     `json:"partner_id"`
	InviteCodeID int64     `json:"invite_code_id"`
	Code         string    `json:"code"`
	TargetRole   string    `json:"target_role"`
	MaxUses      int64     `json:"max_uses"`
	Status       string    `json:"status"`
	ExpiresAt    time.Time `json:"expires_at"`
	CreatedBy    int64     `json:"created_by"`
}

// InviteCodeUsed: a user redeemed an invite code of the class. UsedCount
// and Status are the code's values after this use ("exhausted" once
// UsedCount reaches MaxUses).
type InviteCodeUsed struct {
	ClassID      int64  `json:"class_id"`
	OrgID        int64  `json:"org_id"`
	InviteCodeID int64  `json:"invite_code_id"`
	Code         string `json:"code"`
	TargetRole   string `json:"target_role"`
	UserID       int64  `json:"user_id"`
	EnrollmentID int64  `json:"enrollment_id"`
	UsedCount    int64  `json:"used_count"`
	MaxUses      int64  `json:"max_uses"`
	Status       string `json:"status"`
}

// InviteCodeRevoked: a partner withdrew an invite code; it admits no one.
type InviteCodeRevoked struct {
	ClassID      int64  `json:"class_id"`
	OrgID        int64  `json:"org_id"`
	InviteCodeID int64  `json:"invite_code_id"`
	Code         string `json:"code"`
	RevokedBy    int64  `json:"revoked_by"`
}

// InviteCodeLimitsChanged: a class's capacity or end changed, and with it
// the limits of one of its codes that follow them (the student code's
// max_uses follows the capacity, every code's expiry the end). Status is
// the code's after the change: active, or exhausted when it has been used
// max_uses times already.
type InviteCodeLimitsChanged struct {
	ClassID      int64     `json:"class_id"`
	OrgID        int64     `json:"org_id"`
	InviteCodeID int64     `json:"invite_code_id"`
	MaxUses      int64     `json:"max_uses"`
	ExpiresAt    time.Time `json:"expires_at"`
	Status       string    `json:"status"`
	ChangedBy    int64     `json:"changed_by"`
}

// EnrollmentCreated: a student was enrolled in a class, by a partner
// (Source "partner") or by redeeming an invite code (Source "invite_code").
type EnrollmentCreated struct {
	EnrollmentID int64      `json:"enrollment_id"`
	ClassID      int64      `json:"class_id"`
	OrgID        int64      `json:"org_id"`
	PartnerID    int64      `json:"partner_id"` // the class's partner
	CourseID     *int64     `json:"course_id"`
	StudentID    int64      `json:"student_id"`
	InviteCodeID *int64     `json:"invite_code_id"`
	Status       string     `json:"status"`
	EnrolledAt   time.Time  `json:"enrolled_at"`
	CompletedAt  *time.Time `json:"completed_at"`
	Source       string     `json:"source"`
	EnrolledBy   int64      `json:"enrolled_by"`
}

// EnrollmentDropped: an enrollment ended by being dropped (DELETE); the
// record stays, with status "dropped".
type EnrollmentDropped struct {
	EnrollmentID   int64  `json:"enrollment_id"`
	ClassID        int64  `json:"class_id"`
	OrgID          int64  `json:"org_id"`
	StudentID      int64  `json:"student_id"`
	PreviousStatus string `json:"previous_status"`
	DroppedBy      int64  `json:"dropped_by"`
}

// EventType implements Event.
func (CourseCreated) EventType() string { return "course.created" }

// SchemaVersion implements Event.
func (CourseCreated) SchemaVersion() int { return 1 }

// EventType implements Event.
func (CourseUpdated) EventType() string { return "course.updated" }

// SchemaVersion implements Event.
func (CourseUpdated) SchemaVersion() int { return 1 }

// EventType implements Event.
func (CourseStatusChanged) EventType() string { return "course.status_changed" }

// SchemaVersion implements Event.
func (CourseStatusChanged) SchemaVersion() int { return 1 }

// EventType implements Event.
func (ClassCreated) EventType() string { return "class.created" }

// SchemaVersion implements Event.
func (ClassCreated) SchemaVersion() int { return 1 }

// EventType implements Event.
func (ClassUpdated) EventType() string { return "class.updated" }

// SchemaVersion implements Event.
func (ClassUpdated) SchemaVersion() int { return 1 }

// EventType implements Event.
func (ClassStatusChanged) EventType() string { return "class.status_changed" }

// SchemaVersion implements Event.
func (ClassStatusChanged) SchemaVersion() int { return 1 }

// EventType implements Event.
func (InviteCodeIssued) EventType() string { return "class.invite_code_issued" }

// SchemaVersion implements Event.
func (InviteCodeIssued) SchemaVersion() int { return 1 }

// EventType implements Event.
func (InviteCodeUsed) EventType() string { return "class.invite_code_used" }

// SchemaVersion implements Event.
func (InviteCodeUsed) SchemaVersion() int { return 1 }

// EventType implements Event.
func (InviteCodeRevoked) EventType() string { return "class.invite_code_revoked" }

// SchemaVersion implements Event.
func (InviteCodeRevoked) SchemaVersion() int { return 1 }

// EventType implements Event.
func (InviteCodeLimitsChanged) EventType() string { return "class.invite_code_limits_changed" }

// SchemaVersion implements Event.
func (InviteCodeLimitsChanged) SchemaVersion() int { return 1 }

// EventType implements Event.
func (EnrollmentCreated) EventType() string { return "enrollment.created" }

// SchemaVersion implements Event.
func (EnrollmentCreated) SchemaVersion() int { return 1 }

// EventType implements Event.
func (EnrollmentDropped) EventType() string { return "enrollment.dropped" }

// SchemaVersion implements Event.
func (EnrollmentDropped) SchemaVersion() int { return 1 }

var (
	_ Event = CourseCreated{}
	_ Event = CourseUpdated{}
	_ Event = CourseStatusChanged{}
	_ Event = ClassCreated{}
	_ Event = ClassUpdated{}
	_ Event = ClassStatusChanged{}
	_ Event = InviteCodeIssued{}
	_ Event = InviteCodeUsed{}
	_ Event = InviteCodeRevoked{}
	_ Event = InviteCodeLimitsChanged{}
	_ Event = EnrollmentCreated{}
	_ Event = EnrollmentDropped{}
)

// registerClassroom registers the events of courses, classes (with invite
// codes) and enrollments.
func registerClassroom(r *Registry) {
	register[CourseCreated](r)
	register[CourseUpdated](r)
	register[CourseStatusChanged](r)
	register[ClassCreated](r)
	register[ClassUpdated](r)
	register[ClassStatusChanged](r)
	register[InviteCodeIssued](r)
	register[InviteCodeUsed](r)
	register[InviteCodeRevoked](r)
	register[InviteCodeLimitsChanged](r)
	register[EnrollmentCreated](r)
	register[EnrollmentDropped](r)
}
