package aggregates

import (
	"slices"
	"time"

	"lectern/derrors"
	"lectern/events"
)

// Enrollment statuses.
const (
	EnrollmentActive    = "active"
	EnrollmentInactive  = "inactive"
	EnrollmentCompleted = "completed"
	EnrollmentDropped   = "dropped"
)

// EnrollmentStatuses are every enrollment status.
var EnrollmentStatuses = []string{EnrollmentActive, EnrollmentInactive, EnrollmentCompleted, EnrollmentDropped}

// How an enrollment came about.
const (
	SourcePartner    = "partner"
	SourceInviteCode = "invite_code"
)

// Enrollment is a student's place in a class.
type Enrollment struct {
	ID           int64
	ClassID      int64
	OrgID        int64
	PartnerID    int64
	CourseID     *int64
	StudentID    int64
	InviteCodeID *int64
	Status       string
	EnrolledAt   time.Time
	CompletedAt  *time.Time
	Source       string
	EnrolledBy   int64
	CreatedAt    time.Time
	UpdatedAt    time.Time
	Version      int64
}

// Exists reports whether the enrollment was created.
func (e Enrollment) Exists() bool { return e.Version > 0 }

// EvolveEnrollment applies one event.
func EvolveEnrollment(en Enrollment, env events.Envelope) Enrollment {
	switch e := env.Event.(type) {
	case events.EnrollmentCreated:
		en = Enrollment{
			ID: e.EnrollmentID, ClassID: e.ClassID, OrgID: e.OrgID, PartnerID: e.PartnerID, CourseID: e.CourseID,
			StudentID: e.StudentID, InviteCodeID: e.InviteCodeID, Status: e.Status, EnrolledAt: e.EnrolledAt,
			CompletedAt: e.CompletedAt, Source: e.Source, EnrolledBy: e.EnrolledBy, CreatedAt: env.RecordedAt,
		}
	case events.EnrollmentDropped:
		en.Status = EnrollmentDropped
	}
	en.UpdatedAt = env.RecordedAt
	en.Version = env.Version
	return en
}

// CreateEnrollment is the command to enroll a student in a class. The
// handler has checked the class, the student and the invite code, and has
// claimed the student's active place in the class.
type CreateEnrollment struct {
	EnrollmentID int64
	Class        Class
	StudentID    int64
	InviteCodeID *int64
	Status       *string    // nil: active
	EnrolledAt   *time.Time // nil: Now
	CompletedAt  *time.Time
	Source       string
	CallerID     int64
	Now          time.Time
}

// DecideCreateEnrollment enrolls the student: active and enrolled now unless
// told otherwise. completed_at cannot precede enrolled_at.
func DecideCreateEnrollment(en Enrollment, cmd CreateEnrollment) ([]events.Event, error) {
	if en.Exists() {
		return nil, derrors.New(derrors.ErrConflict, "Enrollment already exists")
	}
	if !cmd.Class.Exists() {
		return nil, derrors.New(derrors.ErrNotFound, "Class not found")
	}
	status := EnrollmentActive
	if cmd.Status != nil {
		status = *cmd.Status
	}
	if !slices.Contains(EnrollmentStatuses, status) {
		return nil, derrors.InvalidField("status", status, "unknown enrollment status")
	}
	if status == EnrollmentActive && cmd.Class.Status == ClassEnded {
		// As a join by invite code is refused: an ended class takes no
		// student. A partner may still record a past (completed,
		// inactive) enrollment in it.
		return nil, derrors.New(derrors.ErrConflict, "The class has ended")
	}
	enrolledAt := cmd.Now
	if cmd.EnrolledAt != nil {
		enrolledAt = *cmd.EnrolledAt
	}
	if cmd.CompletedAt != nil && cmd.CompletedAt.Before(enrolledAt) {
		return nil, derrors.InvalidField("completed_at", cmd.CompletedAt.UTC().Format(time.RFC3339Nano),
			"completed_at must not be before enrolled_at")
	}
	if cmd.CompletedAt != nil && status != EnrollmentCompleted {
		// An active enrollment that says when it was completed contradicts
		// itself (a review recorded one).
		return nil, derrors.InvalidField("completed_at", cmd.CompletedAt.UTC().Format(time.RFC3339Nano),
			"completed_at is for a completed enrollment (status completed)")
	}
	if cmd.InviteCodeID != nil {
		if _, ok := cmd.Class.CodeByID(*cmd.InviteCodeID); !ok {
			return nil, derrors.InvalidField("invite_code_id", *cmd.InviteCodeID, "invite_code_id is not an invite code of this class")
		}
	}
	return []events.Event{events.EnrollmentCreated{
		EnrollmentID: cmd.EnrollmentID, ClassID: cmd.Class.ID, OrgID: cmd.Class.OrgID, PartnerID: cmd.Class.PartnerID,
		CourseID: cmd.Class.CourseID, StudentID: cmd.StudentID, InviteCodeID: cmd.InviteCodeID, Status: status,
		EnrolledAt: enrolledAt, CompletedAt: cmd.CompletedAt, Source: cmd.Source, EnrolledBy: cmd.CallerID,
	}}, nil
}

// DropEnrollment is the command to drop an enrollment.
type DropEnrollment struct {
	EnrollmentID int64
	CallerID     int64
	Admin        bool
	// PartnerOrgIDs are the organisations the caller is an active partner of.
	PartnerOrgIDs []int64
}

// DecideDropEnrollment drops the enrollment. The student, an active partner
// of the class's organisation and an admin may; for anyone else the
// enrollment does not exist. A dropped enrollment cannot be dropped again.
func DecideDropEnrollment(en Enrollment, cmd DropEnrollment) ([]events.Event, error) {
	allowed := en.StudentID == cmd.CallerID || cmd.Admin || slices.Contains(cmd.PartnerOrgIDs, en.OrgID)
	if !en.Exists() || !allowed {
		return nil, derrors.New(derrors.ErrNotFound, "Enrollment not found")
	}
	if en.Status == EnrollmentDropped {
		return nil, derrors.New(derrors.ErrConflict, "The enrollment is already dropped")
	}
	return []events.Event{events.EnrollmentDropped{
		EnrollmentID: en.ID, ClassID: en.ClassID, OrgID: en.OrgID, StudentID: en.StudentID,
		PreviousStatus: en.Status, DroppedBy: cmd.CallerID,
	}}, nil
}
