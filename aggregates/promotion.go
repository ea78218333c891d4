package aggregates

import (
	"time"

	"lectern/derrors"
	"lectern/events"
)

// Promotion request statuses: pending → approved or rejected (by an admin).
const (
	PromotionPending  = "pending"
	PromotionApproved = "approved"
	PromotionRejected = "rejected"
)

// PromotionRequest is a user's request for the partner (or assistant) role.
type PromotionRequest struct {
	ID          int64
	UserID      int64
	Name        string
	Email       string
	OrgName     string
	TargetRole  string
	EduCategory *string
	Status      string
	Reason      *string
	ReviewedBy  *int64
	ReviewedAt  *time.Time
	OrgID       *int64
	PartnerID   *int64
	RequestedAt time.Time
	UpdatedAt   time.Time
	Version     int64
}

// Exists reports whether the request was filed.
func (r PromotionRequest) Exists() bool { return r.Version > 0 }

// EvolvePromotion applies one event.
func EvolvePromotion(r PromotionRequest, env events.Envelope) PromotionRequest {
	at := env.RecordedAt
	switch e := env.Event.(type) {
	case events.PromotionRequested:
		r = PromotionRequest{ID: e.RequestID, UserID: e.UserID, Name: e.Name, Email: e.Email, OrgName: e.OrgName,
			TargetRole: e.TargetRole, EduCategory: e.EduCategory, Status: PromotionPending, RequestedAt: at}
	case events.PromotionApproved:
		r.Status, r.ReviewedBy, r.ReviewedAt = PromotionApproved, &e.ReviewedBy, &at
		r.OrgID, r.PartnerID = &e.OrgID, &e.PartnerID
	case events.PromotionRejected:
		r.Status, r.ReviewedBy, r.ReviewedAt, r.Reason = PromotionRejected, &e.ReviewedBy, &at, e.Reason
	}
	r.UpdatedAt, r.Version = at, env.Version
	return r
}

// RequestPromotion is the command to ask for a role.
type RequestPromotion struct {
	RequestID   int64
	UserID      int64
	Name        string
	Email       string
	OrgName     string
	TargetRole  string
	EduCategory *string
	// AccountEmail is the requester's own verified address: the one the
	// request records, whatever Email says, so that nobody files in
	// another's name.
	AccountEmail string
}

// DecideRequestPromotion files the request.
func DecideRequestPromotion(r PromotionRequest, c RequestPromotion) ([]events.Event, error) {
	if r.Exists() {
		return nil, derrors.New(derrors.ErrConflict, "Promotion request already exists")
	}
	return []events.Event{events.PromotionRequested{RequestID: c.RequestID, UserID: c.UserID, Name: c.Name,
		Email: c.AccountEmail, OrgName: c.OrgName, TargetRole: c.TargetRole, EduCategory: c.EduCategory}}, nil
}

func reviewable(r PromotionRequest) error {
	if !r.Exists() {
		return derrors.New(derrors.ErrNotFound, "Promotion request not found")
	}
	if r.Status != PromotionPending {
		return derrors.New(derrors.ErrConflict, "Promotion request is already %s", r.Status)
	}
	return nil
}

// DecideApprovePromotion approves a pending request, naming the partner
// record and organisation the approval produced.
func DecideApprovePromotion(r PromotionRequest, by, orgID, partnerID int64) ([]events.Event, error) {
	if err := reviewable(r); err != nil {
		return nil, err
	}
	return []events.Event{events.PromotionApproved{RequestID: r.ID, UserID: r.UserID, ReviewedBy: by, OrgID: orgID, PartnerID: partnerID}}, nil
}

// DecideRejectPromotion rejects a pending request.
func DecideRejectPromotion(r PromotionRequest, by int64, reason *string) ([]events.Event, error) {
	if err := reviewable(r); err != nil {
		return nil, err
	}
	return []events.Event{events.PromotionRejected{RequestID: r.ID, UserID: r.UserID, ReviewedBy: by, Reason: reason}}, nil
}

// ApprovalTarget is where an approved requester becomes a partner: a new
// organisation named as the request asks, or an existing one the admin
// names. Approval never joins an organisation by its name alone.
type ApprovalTarget struct {
	NewOrganisation bool
	OrgID           int64
}

// Validate refuses a target that is not exactly one of the two.
func (t ApprovalTarget) Validate() error {
	switch {
	case t.NewOrganisation && t.OrgID != 0:
		return derrors.InvalidField("", nil, "give either organization \"new\" or org_id, not both")
	case !t.NewOrganisation && t.OrgID == 0:
		return derrors.InvalidField("", nil, "say where the partner goes: organization \"new\", or the org_id of an existing organization")
	}
	return nil
}
