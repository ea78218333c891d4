package aggregates

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"lectern/derrors"
	"lectern/events"
)

// Class statuses, in the only order a class moves through them.
const (
	ClassPlanned = "planned"
	ClassActive  = "active"
	ClassEnded   = "ended"
)

// ClassStatuses are the class statuses in order.
var ClassStatuses = []string{ClassPlanned, ClassActive, ClassEnded}

// Invite code statuses and target roles (DESIGN §6). "expired" is never
// recorded: an active code past its expires_at reads as expired.
const (
	CodeActive    = "active"
	CodeExpired   = "expired"
	CodeRevoked   = "revoked"
	CodeExhausted = "exhausted"

	TargetStudent   = "student"
	TargetAssistant = "assistant"
)

// Defaults of the invite codes every new class receives (DESIGN §6).
const (
	DefaultStudentMaxUses   = 100 // when the class has no capacity
	DefaultAssistantMaxUses = 5
	DefaultCodeLifetime     = 180 * 24 * time.Hour // when the class has no end_at
	InviteCodeLength        = 8
	// InviteCodeAlphabet leaves out the characters people confuse (0/O, 1/I/L).
	InviteCodeAlphabet = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
)

// InviteCode is one invite code of a class.
type InviteCode struct {
	ID         int64
	Code       string
	TargetRole string
	MaxUses    int64
	UsedCount  int64
	Status     string // as recorded: active, revoked or exhausted
	ExpiresAt  time.Time
	CreatedBy  int64
	CreatedAt  time.Time
}

// StatusAt is the code's status as a client sees it at now: an active code
// past its expiry is expired.
func (c InviteCode) StatusAt(now time.Time) string {
	if c.Status == CodeActive && !now.Before(c.ExpiresAt) {
		return CodeExpired
	}
	return c.Status
}

// Class is a class of an organisation, with its invite codes.
type Class struct {
	ID              int64
	OrgID           int64
	PartnerID       int64 // the partner who created it
	CourseID        *int64
	Name            string
	Description     *string
	Status          string
	StartAt         *time.Time
	EndAt           *time.Time
	Capacity        *int64
	Timezone        *string
	Location        *string
	OnlineURL       *string
	InviteOnly      bool
	PrimaryModelID  *int64
	AllowedModelIDs []int64
	CreatedBy       int64
	InviteCodes     []InviteCode
	CreatedAt       time.Time
	UpdatedAt       time.Time
	Version         int64
}

// Exists reports whether the class was created.
func (c Class) Exists() bool { return c.Version > 0 }

// Code returns the invite code with the given text.
func (c Class) Code(code string) (InviteCode, bool) {
	i := slices.IndexFunc(c.InviteCodes, func(ic InviteCode) bool { return ic.Code == code })
	if i < 0 {
		return InviteCode{}, false
	}
	return c.InviteCodes[i], true
}

// CodeByID returns the invite code with the given id.
func (c Class) CodeByID(id int64) (InviteCode, bool) {
	i := slices.IndexFunc(c.InviteCodes, func(ic InviteCode) bool { return ic.ID == id })
	if i < 0 {
		return InviteCode{}, false
	}
	return c.InviteCodes[i], true
}

// EvolveClass applies one event.
func EvolveClass(c Class, env events.Envelope) Class {
	switch e := env.Event.(type) {
	case events.ClassCreated:
		c = Class{
			ID: e.ClassID, OrgID: e.OrgID, PartnerID: e.PartnerID, CourseID: e.CourseID, Name: e.Name,
			Description: e.Description, Status: e.Status, StartAt: e.StartAt, EndAt: e.EndAt, Capacity: e.Capacity,
			Timezone: e.Timezone, Location: e.Location, OnlineURL: e.OnlineURL, InviteOnly: e.InviteOnly,
			PrimaryModelID: e.PrimaryModelID, AllowedModelIDs: slices.Clone(e.AllowedModelIDs), CreatedBy: e.CreatedBy,
			CreatedAt: env.RecordedAt,
		}
	case events.ClassUpdated:
		c.CourseID, c.Name, c.Description = e.CourseID, e.Name, e.Description
		c.StartAt, c.EndAt, c.Capacity = e.StartAt, e.EndAt, e.Capacity
		c.Timezone, c.Location, c.OnlineURL, c.InviteOnly = e.Timezone, e.Location, e.OnlineURL, e.InviteOnly
		c.PrimaryModelID, c.AllowedModelIDs = e.PrimaryModelID, slices.Clone(e.AllowedModelIDs)
	case events.ClassStatusChanged:
		c.Status = e.To
	case events.InviteCodeIssued:
		c.InviteCodes = append(slices.Clone(c.InviteCodes), InviteCode{
			ID: e.InviteCodeID, Code: e.Code, TargetRole: e.TargetRole, MaxUses: e.MaxUses, Status: e.Status,
			ExpiresAt: e.ExpiresAt, CreatedBy: e.CreatedBy, CreatedAt: env.RecordedAt,
		})
	case events.InviteCodeUsed:
		c.InviteCodes = withCode(c.InviteCodes, e.InviteCodeID, func(ic *InviteCode) {
			ic.UsedCount, ic.Status = e.UsedCount, e.Status
		})
	case events.InviteCodeRevoked:
		c.InviteCodes = withCode(c.InviteCodes, e.InviteCodeID, func(ic *InviteCode) { ic.Status = CodeRevoked })
	case events.InviteCodeLimitsChanged:
		c.InviteCodes = withCode(c.InviteCodes, e.InviteCodeID, func(ic *InviteCode) {
			ic.MaxUses, ic.ExpiresAt, ic.Status = e.MaxUses, e.ExpiresAt, e.Status
		})
	}
	c.UpdatedAt = env.RecordedAt
	c.Version = env.Version
	return c
}

// withCode returns a copy of codes with f applied to the code of id, so
// states that share history never share a changed code.
func withCode(codes []InviteCode, id int64, f func(*InviteCode)) []InviteCode {
	out := slices.Clone(codes)
	for i := range out {
		if out[i].ID == id {
			f(&out[i])
		}
	}
	return out
}

// NewInviteCode is an invite code the command handler prepared (its id from
// the sequence and its text from a secure random source), so that deciding
// stays pure.
type NewInviteCode struct {
	ID   int64
	Code string
}

// CreateClass is the command to create a class. The handler has checked that
// the course, if any, belongs to the organisation.
type CreateClass struct {
	ClassID         int64
	OrgID           int64
	PartnerID       int64
	CallerID        int64
	CourseID        *int64
	Name            string
	Description     *string
	Status          *string // nil: planned
	StartAt         *time.Time
	EndAt           *time.Time
	Capacity        *int64
	Timezone        *string
	Location        *string
	OnlineURL       *string
	InviteOnly      *bool // nil: false
	PrimaryModelID  *int64
	AllowedModelIDs []int64
	// Catalogue holds the model catalogue's ids, which the class's models
	// must be among (nil: no catalogue to check them against).
	Catalogue     []int64
	StudentCode   NewInviteCode
	AssistantCode NewInviteCode
	Now           time.Time
}

// DecideCreateClass creates the class (planned unless asked otherwise; a new
// class cannot be ended) with its two default invite codes: one for students
// (max_uses = capacity, or 100) and one for assistants (max_uses 5), both
// expiring with the class, or 180 days after creation when it has no end.
func DecideCreateClass(c Class, cmd CreateClass) ([]events.Event, error) {
	if c.Exists() {
		return nil, derrors.New(derrors.ErrConflict, "Class already exists")
	}
	status := ClassPlanned
	if cmd.Status != nil {
		status = *cmd.Status
	}
	switch {
	case strings.TrimSpace(cmd.Name) == "":
		return nil, derrors.InvalidField("name", cmd.Name, "name must not be blank")
	case status == ClassEnded:
		return nil, derrors.InvalidField("status", status, "a new class cannot be ended")
	case !slices.Contains(ClassStatuses, status):
		return nil, derrors.InvalidField("status", status, "unknown class status")
	}
	if err := checkClassFields(cmd.StartAt, cmd.EndAt, cmd.Capacity, false); err != nil {
		return nil, err
	}
	if err := checkClassModels(cmd.PrimaryModelID, cmd.AllowedModelIDs, cmd.Catalogue, true); err != nil {
		return nil, err
	}
	if cmd.StudentCode.Code == "" || cmd.AssistantCode.Code == "" || cmd.StudentCode.Code == cmd.AssistantCode.Code {
		return nil, errors.New("create class: the invite codes were not prepared")
	}
	created := events.ClassCreated{
		ClassID: cmd.ClassID, OrgID: cmd.OrgID, PartnerID: cmd.PartnerID, CourseID: cmd.CourseID, Name: cmd.Name,
		Description: cmd.Description, Status: status, StartAt: cmd.StartAt, EndAt: cmd.EndAt, Capacity: cmd.Capacity,
		Timezone: cmd.Timezone, Location: cmd.Location, OnlineURL: cmd.OnlineURL, InviteOnly: cmd.InviteOnly != nil && *cmd.InviteOnly,
		PrimaryModelID: cmd.PrimaryModelID, AllowedModelIDs: nonNil(cmd.AllowedModelIDs), CreatedBy: cmd.CallerID,
	}
	expires := cmd.Now.Add(DefaultCodeLifetime)
	if cmd.EndAt != nil {
		expires = *cmd.EndAt
	}
	studentUses := int64(DefaultStudentMaxUses)
	if cmd.Capacity != nil {
		studentUses = *cmd.Capacity
	}
	issue := func(code NewInviteCode, role string, maxUses int64) events.InviteCodeIssued {
		return events.InviteCodeIssued{
			ClassID: cmd.ClassID, OrgID: cmd.OrgID, PartnerID: cmd.PartnerID, InviteCodeID: code.ID, Code: code.Code,
			TargetRole: role, MaxUses: maxUses, Status: CodeActive, ExpiresAt: expires, CreatedBy: cmd.CallerID,
		}
	}
	return []events.Event{
		created,
		issue(cmd.StudentCode, TargetStudent, studentUses),
		issue(cmd.AssistantCode, TargetAssistant, DefaultAssistantMaxUses),
	}, nil
}

// checkClassFields checks a class's times and capacity; of times out of
// order, it blames the end, or the start where only the start was sent
// (blameStart).
func checkClassFields(start, end *time.Time, capacity *int64, blameStart bool) error {
	if start != nil && end != nil && end.Before(*start) {
		if blameStart {
			return derrors.InvalidField("start_at", start.UTC().Format(time.RFC3339Nano), "start_at must not be after end_at")
		}
		return derrors.InvalidField("end_at", end.UTC().Format(time.RFC3339Nano), "end_at must not be before start_at")
	}
	if capacity != nil && *capacity < 1 {
		return derrors.InvalidField("capacity", *capacity, "capacity must be at least 1")
	}
	return nil
}

// checkClassModels refuses a class's models that are not in the catalogue,
// and a list that names a model twice: a class whose models no turn can use
// would refuse every practice turn. With pairing, it refuses a primary model
// outside a non-empty allowed list too: no turn could use it, and turns
// would quietly fall back to another model than the one the partner chose.
func checkClassModels(primary *int64, allowed, catalogue []int64, pairing bool) error {
	var errs []error
	switch {
	case primary != nil && catalogue != nil && !slices.Contains(catalogue, *primary):
		errs = append(errs, &derrors.FieldError{Kind: ErrUnknownModel, Field: "primary_model_id", Input: *primary,
			Msg: fmt.Sprintf("no model has id %d", *primary)})
	case pairing && primary != nil && len(allowed) > 0 && !slices.Contains(allowed, *primary):
		errs = append(errs, derrors.InvalidField("primary_model_id", *primary,
			fmt.Sprintf("model %d is not one of the class's allowed_model_ids", *primary)))
	}
	for i, id := range allowed {
		field := derrors.Item("allowed_model_ids", i)
		switch {
		case catalogue != nil && !slices.Contains(catalogue, id):
			errs = append(errs, &derrors.FieldError{Kind: ErrUnknownModel, Field: field, Input: id, Msg: fmt.Sprintf("no model has id %d", id)})
		case slices.Index(allowed, id) < i:
			errs = append(errs, derrors.InvalidField(field, id, fmt.Sprintf("model %d is named more than once", id)))
		}
	}
	return errors.Join(errs...)
}

func nonNil(ids []int64) []int64 {
	if ids == nil {
		return []int64{}
	}
	return slices.Clone(ids)
}

// UpdateClass is a merge update of a class by a partner of its organisation.
// The handler has checked that a new course belongs to the organisation.
type UpdateClass struct {
	ClassID         int64
	OrgID           int64 // the caller's organisation
	CallerID        int64
	CourseID        Patch[*int64]
	Name            Patch[string]
	Description     Patch[*string]
	Status          Patch[string]
	StartAt         Patch[*time.Time]
	EndAt           Patch[*time.Time]
	Capacity        Patch[*int64]
	Timezone        Patch[*string]
	Location        Patch[*string]
	OnlineURL       Patch[*string]
	InviteOnly      Patch[bool]
	PrimaryModelID  Patch[*int64]
	AllowedModelIDs Patch[[]int64]
	// Catalogue is CreateClass.Catalogue.
	Catalogue []int64
}

// DecideUpdateClass applies the fields that change and moves the status
// forward. A class of another organisation does not exist for the caller.
// An update that changes nothing records nothing.
func DecideUpdateClass(c Class, cmd UpdateClass) ([]events.Event, error) {
	if !c.Exists() || c.OrgID != cmd.OrgID {
		return nil, derrors.New(derrors.ErrNotFound, "Class not found")
	}
	e := events.ClassUpdated{
		ClassID: c.ID, OrgID: c.OrgID, CourseID: c.CourseID, Name: c.Name, Description: c.Description,
		StartAt: c.StartAt, EndAt: c.EndAt, Capacity: c.Capacity, Timezone: c.Timezone, Location: c.Location,
		OnlineURL: c.OnlineURL, InviteOnly: c.InviteOnly, PrimaryModelID: c.PrimaryModelID,
		AllowedModelIDs: nonNil(c.AllowedModelIDs), UpdatedBy: cmd.CallerID,
	}
	change := func(name string, differs bool, apply func()) {
		if differs {
			apply()
			e.Changed = append(e.Changed, name)
		}
	}
	change("course_id", cmd.CourseID.Set && !equalPtr(cmd.CourseID.Value, c.CourseID), func() { e.CourseID = cmd.CourseID.Value })
	change("name", cmd.Name.Set && cmd.Name.Value != c.Name, func() { e.Name = cmd.Name.Value })
	change("description", cmd.Description.Set && !equalPtr(cmd.Description.Value, c.Description), func() { e.Description = cmd.Description.Value })
	change("start_at", cmd.StartAt.Set && !equalTime(cmd.StartAt.Value, c.StartAt), func() { e.StartAt = cmd.StartAt.Value })
	change("end_at", cmd.EndAt.Set && !equalTime(cmd.EndAt.Value, c.EndAt), func() { e.EndAt = cmd.EndAt.Value })
	change("capacity", cmd.Capacity.Set && !equalPtr(cmd.Capacity.Value, c.Capacity), func() { e.Capacity = cmd.Capacity.Value })
	change("timezone", cmd.Timezone.Set && !equalPtr(cmd.Timezone.Value, c.Timezone), func() { e.Timezone = cmd.Timezone.Value })
	change("location", cmd.Location.Set && !equalPtr(cmd.Location.Value, c.Location), func() { e.Location = cmd.Location.Value })
	change("online_url", cmd.OnlineURL.Set && !equalPtr(cmd.OnlineURL.Value, c.OnlineURL), func() { e.OnlineURL = cmd.OnlineURL.Value })
	change("invite_only", cmd.InviteOnly.Set && cmd.InviteOnly.Value != c.InviteOnly, func() { e.InviteOnly = cmd.InviteOnly.Value })
	change("primary_model_id", cmd.PrimaryModelID.Set && !equalPtr(cmd.PrimaryModelID.Value, c.PrimaryModelID), func() { e.PrimaryModelID = cmd.PrimaryModelID.Value })
	change("allowed_model_ids", cmd.AllowedModelIDs.Set && !slices.Equal(nonNil(cmd.AllowedModelIDs.Value), nonNil(c.AllowedModelIDs)),
		func() { e.AllowedModelIDs = nonNil(cmd.AllowedModelIDs.Value) })
	if strings.TrimSpace(e.Name) == "" {
		return nil, derrors.InvalidField("name", e.Name, "name must not be blank")
	}
	if err := checkClassFields(e.StartAt, e.EndAt, e.Capacity, cmd.StartAt.Set && !cmd.EndAt.Set); err != nil {
		return nil, err
	}
	// A model the class names already passes (one withdrawn from the
	// catalogue since blocks no other change); only a new one is checked.
	catalogue := cmd.Catalogue
	if catalogue != nil {
		catalogue = slices.Concat(catalogue, c.AllowedModelIDs)
		if c.PrimaryModelID != nil {
			catalogue = append(catalogue, *c.PrimaryModelID)
		}
	}
	// A class recorded before the pairing was checked keeps its models
	// until a change of them.
	pairing := slices.Contains(e.Changed, "primary_model_id") || slices.Contains(e.Changed, "allowed_model_ids")
	if err := checkClassModels(e.PrimaryModelID, e.AllowedModelIDs, catalogue, pairing); err != nil {
		return nil, err
	}
	var out []events.Event
	if len(e.Changed) > 0 {
		out = append(out, e)
		out = append(out, codeLimits(c, e)...)
	}
	if cmd.Status.Set && cmd.Status.Value != c.Status {
		if err := moveForward("Class", ClassStatuses, c.Status, cmd.Status.Value); err != nil {
			return nil, err
		}
		out = append(out, events.ClassStatusChanged{ClassID: c.ID, OrgID: c.OrgID, From: c.Status, To: cmd.Status.Value, ChangedBy: cmd.CallerID})
	}
	return out, nil
}

// codeLimits are the changes of c's codes' limits that update u brings:
// the limits a class's codes were issued with follow its capacity (the
// student codes' max_uses: the capacity, or DefaultStudentMaxUses) and its
// end (every code's expiry: end_at, or DefaultCodeLifetime after the code
// was issued), so a change of either changes them too; other changes leave
// them. A revoked code stays as it is.
func codeLimits(c Class, u events.ClassUpdated) []events.Event {
	capacity, end := !equalPtr(u.Capacity, c.Capacity), !equalTime(u.EndAt, c.EndAt)
	var out []events.Event
	for _, ic := range c.InviteCodes {
		if ic.Status == CodeRevoked {
			continue
		}
		maxUses, expires := ic.MaxUses, ic.ExpiresAt
		if capacity && ic.TargetRole == TargetStudent {
			maxUses = DefaultStudentMaxUses
			if u.Capacity != nil {
				maxUses = *u.Capacity
			}
		}
		if end {
			expires = ic.CreatedAt.Add(DefaultCodeLifetime)
			if u.EndAt != nil {
				expires = *u.EndAt
			}
		}
		if maxUses == ic.MaxUses && expires.Equal(ic.ExpiresAt) {
			continue
		}
		status := CodeActive
		if ic.UsedCount >= maxUses {
			status = CodeExhausted
		}
		out = append(out, events.InviteCodeLimitsChanged{ClassID: c.ID, OrgID: c.OrgID, InviteCodeID: ic.ID,
			MaxUses: maxUses, ExpiresAt: expires, Status: status, ChangedBy: u.UpdatedBy})
	}
	return out
}

func equalTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// UseInviteCode is redeeming an invite code to enroll UserID as a student;
// EnrollmentID is the enrollment the use creates.
type UseInviteCode struct {
	Code         string
	UserID       int64
	EnrollmentID int64
	Now          time.Time
}

// DecideUseInviteCode counts one use of a student code. A revoked, expired
// or used-up code admits no one, nor does any code of an ended class; an
// assistant code does not enroll students. The use that reaches max_uses
// exhausts the code.
func DecideUseInviteCode(c Class, cmd UseInviteCode) ([]events.Event, error) {
	code, ok := c.Code(cmd.Code)
	if !c.Exists() || !ok {
		return nil, derrors.New(derrors.ErrNotFound, "Invite code not found")
	}
	switch code.StatusAt(cmd.Now) {
	case CodeRevoked:
		return nil, derrors.New(derrors.ErrConflict, "The invite code has been revoked")
	case CodeExpired:
		return nil, derrors.New(derrors.ErrConflict, "The invite code has expired")
	case CodeExhausted:
		return nil, derrors.New(derrors.ErrConflict, "The invite code has reached its maximum number of uses")
	}
	if code.UsedCount >= code.MaxUses {
		return nil, derrors.New(derrors.ErrConflict, "The invite code has reached its maximum number of uses")
	}
	if code.TargetRole != TargetStudent {
		return nil, derrors.New(derrors.ErrConflict, "This is an assistant invite code; it cannot be used to join a class as a student")
	}
	if c.Status == ClassEnded {
		return nil, derrors.New(derrors.ErrConflict, "The class has ended")
	}
	used := code.UsedCount + 1
	status := CodeActive
	if used >= code.MaxUses {
		status = CodeExhausted
	}
	return []events.Event{events.InviteCodeUsed{
		ClassID: c.ID, OrgID: c.OrgID, InviteCodeID: code.ID, Code: code.Code, TargetRole: code.TargetRole,
		UserID: cmd.UserID, EnrollmentID: cmd.EnrollmentID, UsedCount: used, MaxUses: code.MaxUses, Status: status,
	}}, nil
}

// RevokeInviteCode withdraws an invite code of a class.
type RevokeInviteCode struct {
	ClassID      int64
	OrgID        int64 // the caller's organisation
	InviteCodeID int64
	CallerID     int64
}

// DecideRevokeInviteCode revokes the code; revoking a revoked code records
// nothing.
func DecideRevokeInviteCode(c Class, cmd RevokeInviteCode) ([]events.Event, error) {
	if !c.Exists() || c.OrgID != cmd.OrgID {
		return nil, derrors.New(derrors.ErrNotFound, "Class not found")
	}
	code, ok := c.CodeByID(cmd.InviteCodeID)
	if !ok {
		return nil, derrors.New(derrors.ErrNotFound, "Invite code not found")
	}
	if code.Status == CodeRevoked {
		return nil, nil
	}
	return []events.Event{events.InviteCodeRevoked{
		ClassID: c.ID, OrgID: c.OrgID, InviteCodeID: code.ID, Code: code.Code, RevokedBy: cmd.CallerID,
	}}, nil
}
