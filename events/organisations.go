package events

// Stream categories of organisations, partners and promotion requests.
const (
	CategoryOrganisation = "org"
	CategoryPartner      = "partner"
	CategoryPromotion    = "promotion"
)

// registerOrganisations registers the events of organisations, partners and
// promotion requests.
func registerOrganisations(r *Registry) {
	register[OrganisationCreated](r)
	register[PartnerCreated](r)
	register[PartnerErased](r)
	register[PromotionRequested](r)
	register[PromotionApproved](r)
	register[PromotionRejected](r)
}

// OrganisationCreated: an organisation (a school, a company) was created.
type OrganisationCreated struct {
	OrgID     int64  `json:"org_id"`
	Name      string `json:"name"`
	CreatedBy int64  `json:"created_by"`
}

// PartnerCreated: a person became an instructor (partner) or assistant of an
// organisation, optionally tied to a user account.
type PartnerCreated struct {
	PartnerID int64   `json:"partner_id"`
	OrgID     int64   `json:"org_id"`
	UserID    *int64  `json:"user_id"`
	FullName  string  `json:"full_name"`
	Email     string  `json:"email"`
	Phone     *string `json:"phone"`
	Role      string  `json:"role"`
	IsActive  bool    `json:"is_active"`
}

// PartnerErased: an admin erased the personal data of a partner without a
// user account (its own subject; a partner with an account goes with the
// user's erasure). No personal data.
type PartnerErased struct {
	PartnerID int64 `json:"partner_id"`
	Actor     int64 `json:"actor"`
}

// PromotionRequested: a user asked for the partner (or assistant) role.
type PromotionRequested struct {
	RequestID   int64   `json:"request_id"`
	UserID      int64   `json:"user_id"`
	Name        string  `json:"name"`
	Email       string  `json:"email"`
	OrgName     string  `json:"org_name"`
	TargetRole  string  `json:"target_role"`
	EduCategory *string `json:"edu_category"`
}

// PromotionApproved: an admin approved a request; the partner record and the
// organisation it joined are named.
type PromotionApproved struct {
	RequestID  int64 `json:"request_id"`
	UserID     int64 `json:"user_id"`
	ReviewedBy int64 `json:"reviewed_by"`
	OrgID      int64 `json:"org_id"`
	PartnerID  int64 `json:"partner_id"`
}

// PromotionRejected: an admin rejected a request, saying why.
type PromotionRejected struct {
	RequestID  int64   `json:"request_id"`
	UserID     int64   `json:"user_id"`
	ReviewedBy int64   `json:"reviewed_by"`
	Reason     *string `json:"reason"`
}

// EventType implements Event.
func (OrganisationCreated) EventType() string { return "org.created" }

// EventType implements Event.
func (PartnerCreated) EventType() string { return "partner.created" }

// EventType implements Event.
func (PartnerErased) EventType() string { return "partner.erased" }

// EventType implements Event.
func (PromotionRequested) EventType() string { return "promotion.requested" }

// EventType implements Event.
func (PromotionApproved) EventType() string { return "promotion.approved" }

// EventType implements Event.
func (PromotionRejected) EventType() string { return "promotion.rejected" }

// SchemaVersion implements Event.
func (OrganisationCreated) SchemaVersion() int { return 1 }

// SchemaVersion implements Event.
func (PartnerCreated) SchemaVersion() int { return 1 }

// SchemaVersion implements Event.
func (PartnerErased) SchemaVersion() int { return 1 }

// SchemaVersion implements Event.
func (PromotionRequested) SchemaVersion() int { return 1 }

// SchemaVersion implements Event.
func (PromotionApproved) SchemaVersion() int { return 1 }

// SchemaVersion implements Event.
func (PromotionRejected) SchemaVersion() int { return 1 }

var (
	_ Event = OrganisationCreated{}
	_ Event = PartnerCreated{}
	_ Event = PartnerErased{}
	_ Event = PromotionRequested{}
	_ Event = PromotionApproved{}
	_ Event = PromotionRejected{}
)
