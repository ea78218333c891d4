package aggregates

import (
	"slices"
	"strings"
	"time"

	"lectern/derrors"
	"lectern/events"
)

// Course statuses, in the only order a course moves through them.
const (
	CourseDraft    = "draft"
	CourseActive   = "active"
	CourseArchived = "archived"
)

// CourseStatuses are the course statuses in order.
var CourseStatuses = []string{CourseDraft, CourseActive, CourseArchived}

// Course is a course of an organisation.
type Course struct {
	ID          int64
	OrgID       int64
	PartnerID   int64 // the partner who created it
	Title       string
	CourseKey   string
	Status      string
	StartDate   *string // YYYY-MM-DD
	EndDate     *string
	Description *string
	CreatedBy   int64
	CreatedAt   time.Time
	UpdatedAt   time.Time
	Version     int64
}

// Exists reports whether the course was created.
func (c Course) Exists() bool { return c.Version > 0 }

// CheckTakesClasses refuses a class created in, or moved into, an archived
// course: archived is a course's end, as ended is a class's.
func (c Course) CheckTakesClasses() error {
	if c.Status == CourseArchived {
		return derrors.New(derrors.ErrConflict, "The course is archived: it takes no new classes")
	}
	return nil
}

// EvolveCourse applies one event.
func EvolveCourse(c Course, env events.Envelope) Course {
	switch e := env.Event.(type) {
	case events.CourseCreated:
		c = Course{
			ID: e.CourseID, OrgID: e.OrgID, PartnerID: e.PartnerID, Title: e.Title, CourseKey: e.CourseKey,
			Status: e.Status, StartDate: e.StartDate, EndDate: e.EndDate, Description: e.Description,
			CreatedBy: e.CreatedBy, CreatedAt: env.RecordedAt,
		}
	case events.CourseUpdated:
		c.Title, c.CourseKey = e.Title, e.CourseKey
		c.StartDate, c.EndDate, c.Description = e.StartDate, e.EndDate, e.Description
	case events.CourseStatusChanged:
		c.Status = e.To
	}
	c.UpdatedAt = env.RecordedAt
	c.Version = env.Version
	return c
}

// CreateCourse is the command to create a course. The course key's
// uniqueness in the organisation is claimed by the command handler.
type CreateCourse struct {
	CourseID    int64
	OrgID       int64
	PartnerID   int64
	CallerID    int64
	Title       string
	CourseKey   string
	Status      *string // nil: draft
	StartDate   *string
	EndDate     *string
	Description *string
}

// DecideCreateCourse creates the course; its status defaults to draft.
func DecideCreateCourse(c Course, cmd CreateCourse) ([]events.Event, error) {
	if c.Exists() {
		return nil, derrors.New(derrors.ErrConflict, "Course already exists")
	}
	if err := checkCourseFields(cmd.Title, cmd.CourseKey, cmd.StartDate, cmd.EndDate, false); err != nil {
		return nil, err
	}
	status := CourseDraft
	if cmd.Status != nil {
		status = *cmd.Status
	}
	if !slices.Contains(CourseStatuses, status) {
		return nil, derrors.InvalidField("status", status, "unknown course status")
	}
	return []events.Event{events.CourseCreated{
		CourseID: cmd.CourseID, OrgID: cmd.OrgID, PartnerID: cmd.PartnerID, Title: cmd.Title, CourseKey: cmd.CourseKey,
		Status: status, StartDate: cmd.StartDate, EndDate: cmd.EndDate, Description: cmd.Description, CreatedBy: cmd.CallerID,
	}}, nil
}

// checkCourseFields checks a course's fields; of dates out of order, it
// blames the end, or the start where only the start was sent (blameStart).
func checkCourseFields(title, key string, start, end *string, blameStart bool) error {
	if strings.TrimSpace(title) == "" {
		return derrors.InvalidField("title", title, "title must not be blank")
	}
	if strings.TrimSpace(key) == "" {
		return derrors.InvalidField("course_key", key, "course_key must not be blank")
	}
	// Dates are YYYY-MM-DD, so they order as strings.
	if start != nil && end != nil && *end < *start {
		if blameStart {
			return derrors.InvalidField("start_date", *start, "start_date must not be after end_date")
		}
		return derrors.InvalidField("end_date", *end, "end_date must not be before start_date")
	}
	return nil
}

// UpdateCourse is a merge update of a course by a partner of its organisation.
type UpdateCourse struct {
	CourseID    int64
	OrgID       int64 // the caller's organisation
	CallerID    int64
	Title       Patch[string]
	CourseKey   Patch[string]
	Status      Patch[string]
	StartDate   Patch[*string]
	EndDate     Patch[*string]
	Description Patch[*string]
}

// DecideUpdateCourse applies the fields that change and moves the status
// forward. A course of another organisation does not exist for the caller.
// An update that changes nothing records nothing.
func DecideUpdateCourse(c Course, cmd UpdateCourse) ([]events.Event, error) {
	if !c.Exists() || c.OrgID != cmd.OrgID {
		return nil, derrors.New(derrors.ErrNotFound, "Course not found")
	}
	e := events.CourseUpdated{
		CourseID: c.ID, OrgID: c.OrgID, Title: c.Title, CourseKey: c.CourseKey,
		StartDate: c.StartDate, EndDate: c.EndDate, Description: c.Description, UpdatedBy: cmd.CallerID,
	}
	if cmd.Title.Set && cmd.Title.Value != c.Title {
		e.Title = cmd.Title.Value
		e.Changed = append(e.Changed, "title")
	}
	if cmd.CourseKey.Set && cmd.CourseKey.Value != c.CourseKey {
		e.CourseKey = cmd.CourseKey.Value
		e.Changed = append(e.Changed, "course_key")
	}
	if cmd.StartDate.Set && !equalPtr(cmd.StartDate.Value, c.StartDate) {
		e.StartDate = cmd.StartDate.Value
		e.Changed = append(e.Changed, "start_date")
	}
	if cmd.EndDate.Set && !equalPtr(cmd.EndDate.Value, c.EndDate) {
		e.EndDate = cmd.EndDate.Value
		e.Changed = append(e.Changed, "end_date")
	}
	if cmd.Description.Set && !equalPtr(cmd.Description.Value, c.Description) {
		e.Description = cmd.Description.Value
		e.Changed = append(e.Changed, "description")
	}
	if err := checkCourseFields(e.Title, e.CourseKey, e.StartDate, e.EndDate, cmd.StartDate.Set && !cmd.EndDate.Set); err != nil {
		return nil, err
	}
	var out []events.Event
	if len(e.Changed) > 0 {
		out = append(out, e)
	}
	if cmd.Status.Set && cmd.Status.Value != c.Status {
		if err := moveForward("Course", CourseStatuses, c.Status, cmd.Status.Value); err != nil {
			return nil, err
		}
		out = append(out, events.CourseStatusChanged{CourseID: c.ID, OrgID: c.OrgID, From: c.Status, To: cmd.Status.Value, ChangedBy: cmd.CallerID})
	}
	return out, nil
}

// moveForward allows a status to move only later in order (skipping steps is
// a forward move); anything else is a conflict.
func moveForward(what string, order []string, from, to string) error {
	i, j := slices.Index(order, from), slices.Index(order, to)
	if j < 0 {
		return derrors.InvalidField("status", to, "unknown "+strings.ToLower(what)+" status")
	}
	if j <= i {
		return derrors.New(derrors.ErrConflict, "%s status cannot move from %s to %s; it only moves forward: %s",
			what, from, to, strings.Join(order, " → "))
	}
	return nil
}
