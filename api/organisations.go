package api

import (
	"net/http"

	"lectern/aggregates"
	"lectern/api/validation"
	"lectern/derrors"
	"lectern/projections"
	"lectern/queries"
)

var (
	orgReadModels       = []string{projections.OrganisationsProjection}
	partnerReadModels   = []string{projections.PartnersProjection, projections.UsersProjection}
	promotionReadModels = []string{projections.PromotionsProjection, projections.PartnersProjection,
		projections.OrganisationsProjection, projections.UsersProjection}

	roleField = validation.Field{Name: "role", Kind: validation.Enum, Enum: aggregates.PartnerRoles, Default: "partner"}

	createOrgBody = validation.Schema{Fields: []validation.Field{
		{Name: "name", Kind: validation.String, Required: true, MinLength: 1, MaxLength: maxName},
	}}
	createPartnerQuery = []validation.Field{{Name: "org_id", Kind: validation.Int, Required: true, Ge: bound(1)}}
	createPartnerBody  = validation.Schema{Fields: []validation.Field{
		{Name: "org_id", Kind: validation.Int, Required: true, Ge: bound(1)},
		{Name: "full_name", Kind: validation.String, Required: true, MinLength: 1, MaxLength: maxName},
		{Name: "email", Kind: validation.Email, Required: true},
		optString("phone", 50, true),
		roleField,
		{Name: "is_active", Kind: validation.Bool, Nullable: true, Default: true},
		{Name: "user_id", Kind: validation.Int, Nullable: true, Ge: bound(1)},
	}}
	promotionBody = validation.Schema{Fields: []validation.Field{
		{Name: "name", Kind: validation.String, Required: true, MinLength: 1, MaxLength: maxName},
		{Name: "email", Kind: validation.Email, Required: true,
			Description: "required by the contract; the request records the address of the caller's own (verified) account, whatever is sent"},
		{Name: "org_name", Kind: validation.String, Required: true, MinLength: 1, MaxLength: maxName},
		optString("edu_category", maxName, true),
		{Name: "target_role", Kind: validation.Enum, Enum: aggregates.PartnerRoles, Default: "partner"},
	}}
	promotionListQuery = append([]validation.Field{
		{Name: "status", Kind: validation.Enum, Enum: []string{aggregates.PromotionPending, aggregates.PromotionApproved, aggregates.PromotionRejected}},
	}, pageQuery...)
	requestPath = []validation.Field{idParam("request_id")}
	rejectBody  = validation.Schema{Fields: []validation.Field{optString("reason", 1000, true)}}
	approveBody = validation.Schema{Fields: []validation.Field{
		{Name: "organization", Kind: validation.Literal, Enum: []string{"new"},
			Description: "\"new\": the requester becomes the partner of a new organization named org_name (409 if one has that name)"},
		{Name: "org_id", Kind: validation.Int, Ge: bound(1),
			Description: "the existing organization the requester joins as its partner (see matching_organizations in the list)"},
	}}
)

// organisationOperations are organisations, partners and promotion requests.
func (s *Server) organisationOperations() []operation {
	// Their 201s send no Location: no GET reads one organization, partner
	// or promotion request.
	return []operation{
		{method: http.MethodPost, path: "/admin/organizations", id: "create_organization", tag: "administration", auth: true,
			summary: "Create an organization (admin)", body: &createOrgBody, status: 201, response: "Organization",
			errors: []int{401, 403, 409}, handle: s.createOrganisation},
		{method: http.MethodGet, path: "/admin/organizations", id: "list_organizations", tag: "administration", auth: true,
			summary: "List organizations (admin)", query: pageQuery, status: 200, response: "OrganizationList",
			errors: []int{401, 403}, handle: s.listOrganisations},
		{method: http.MethodPost, path: "/partner/partners", id: "create_partner", tag: "partners", auth: true,
			summary: "Create a partner of an organization (admin)", query: createPartnerQuery, body: &createPartnerBody,
			status: 201, response: "Partner", errors: []int{401, 403, 404, 409}, handle: s.createPartner},
		{method: http.MethodPost, path: "/user/partner-promotion-requests", id: "request_partner_promotion", tag: "partners", auth: true,
			summary: "Ask for the partner role", body: &promotionBody, status: 201, response: "PromotionRequest",
			errors: []int{401}, handle: s.requestPromotion},
		{method: http.MethodGet, path: "/admin/partner-promotion-requests", id: "list_promotion_requests", tag: "administration", auth: true,
			summary: "List promotion requests (admin)", query: promotionListQuery, status: 200, response: "PromotionRequestList",
			errors: []int{401, 403}, handle: s.listPromotions},
		{method: http.MethodPost, path: "/admin/partner-promotion-requests/{request_id}/approve", id: "approve_promotion_request",
			tag: "administration", auth: true, summary: "Approve a promotion request: the requester becomes the partner of a new organization, or of the existing one named by org_id, and is granted the role; exactly one of organization \"new\" and org_id",
			pathParams: requestPath, body: &approveBody, status: 200, response: "PromotionRequest", errors: []int{401, 403, 404, 409}, handle: s.approvePromotion},
		{method: http.MethodPost, path: "/admin/partner-promotion-requests/{request_id}/reject", id: "reject_promotion_request",
			tag: "administration", auth: true, summary: "Reject a promotion request", pathParams: requestPath, body: &rejectBody,
			status: 200, response: "PromotionRequest", errors: []int{401, 403, 404, 409}, handle: s.rejectPromotion},
	}
}

// organisationComponents are their response schemas.
func organisationComponents() schema {
	return schema{
		"Organization": object(schema{"id": integer(), "name": str(), "created_at": dateTime(), "updated_at": dateTime()},
			"id", "name", "created_at", "updated_at"),
		"OrganizationList": listOf("Organization"),
		"Partner": object(schema{
			"id": integer(), "org_id": integer(), "full_name": str(), "email": schema{"type": "string", "format": "email"},
			"phone": nullable(str()), "role": str(), "is_active": boolean(), "user_id": nullable(integer()),
			"created_at": dateTime(), "updated_at": dateTime(), "last_login_at": nullable(dateTime()),
		}, "id", "org_id", "full_name", "email", "role", "is_active", "created_at", "updated_at"),
		"PromotionRequest": object(schema{
			"request_id": integer(), "status": schema{"type": "string", "enum": []string{"pending", "approved", "rejected"}},
			"name": str(), "email": str(), "org_name": str(), "target_role": str(), "requested_at": dateTime(),
			"edu_category": nullable(str()), "user_id": integer(), "reason": nullable(str()),
			"reviewed_by": nullable(integer()), "reviewed_at": nullable(dateTime()),
			"org_id": nullable(integer()), "partner_id": nullable(integer()),
			"matching_organizations": schema{"type": "array", "items": ref("OrganizationRef"),
				"description": "in the admin's list: the organizations whose names match org_name (ignoring case and spaces)"},
		}, "request_id", "status", "name", "email", "org_name", "target_role", "requested_at"),
		"PromotionRequestList": listOf("PromotionRequest"),
		"OrganizationRef":      object(schema{"id": integer(), "name": str()}, "id", "name"),
	}
}

type orgJSON struct {
	ID        int64  `json:"id"`
	Name      string `json:"name"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
}

type partnerJSON struct {
	ID          int64   `json:"id"`
	OrgID       int64   `json:"org_id"`
	FullName    string  `json:"full_name"`
	Email       string  `json:"email"`
	Phone       *string `json:"phone"`
	Role        string  `json:"role"`
	IsActive    bool    `json:"is_active"`
	UserID      *int64  `json:"user_id"`
	CreatedAt   string  `json:"created_at"`
	UpdatedAt   string  `json:"updated_at"`
	LastLoginAt *string `json:"last_login_at"`
}

type promotionJSON struct {
	RequestID   int64   `json:"request_id"`
	Status      string  `json:"status"`
	Name        string  `json:"name"`
	Email       string  `json:"email"`
	OrgName     string  `json:"org_name"`
	TargetRole  string  `json:"target_role"`
	RequestedAt string  `json:"requested_at"`
	EduCategory *string `json:"edu_category"`
	UserID      int64   `json:"user_id"`
	Reason      *string `json:"reason"`
	ReviewedBy  *int64  `json:"reviewed_by"`
	ReviewedAt  *string `json:"reviewed_at"`
	OrgID       *int64  `json:"org_id"`
	PartnerID   *int64  `json:"partner_id"`
	// Matching is listed for the admin only (omitted elsewhere).
	Matching *[]queries.OrganizationRef `json:"matching_organizations,omitempty"`
}

func promotionFromState(r aggregates.PromotionRequest) promotionJSON {
	return promotionJSON{RequestID: r.ID, Status: r.Status, Name: r.Name, Email: r.Email, OrgName: r.OrgName,
		TargetRole: r.TargetRole, RequestedAt: ts(r.RequestedAt), EduCategory: r.EduCategory, UserID: r.UserID,
		Reason: r.Reason, ReviewedBy: r.ReviewedBy, ReviewedAt: tsPtr(r.ReviewedAt), OrgID: r.OrgID, PartnerID: r.PartnerID}
}

func promotionFromRow(r queries.PromotionRequest) promotionJSON {
	return promotionJSON{RequestID: r.ID, Status: r.Status, Name: r.Name, Email: r.Email, OrgName: r.OrgName,
		TargetRole: r.TargetRole, RequestedAt: ts(r.RequestedAt), EduCategory: r.EduCategory, UserID: r.UserID,
		Reason: r.Reason, ReviewedBy: r.ReviewedBy, ReviewedAt: tsPtr(r.ReviewedAt), OrgID: r.OrgID, PartnerID: r.PartnerID,
		Matching: &r.Matching}
}

func (s *Server) createOrganisation(w http.ResponseWriter, r *http.Request, in input) error {
	if err := requireAdmin(in.user); err != nil {
		return err
	}
	name, _ := in.body.String("name")
	org, res, err := s.deps.Commands.Organisations.CreateOrganisation(r.Context(), name, in.user.UserID)
	if err != nil {
		return err
	}
	s.settle(w, r, res, orgReadModels...)
	writeJSON(w, http.StatusCreated, orgJSON{ID: org.ID, Name: org.Name, CreatedAt: ts(org.CreatedAt), UpdatedAt: ts(org.UpdatedAt)})
	return nil
}

func (s *Server) listOrganisations(w http.ResponseWriter, r *http.Request, in input) error {
	if err := requireAdmin(in.user); err != nil {
		return err
	}
	if err := s.awaitMinPosition(w, r, orgReadModels...); err != nil {
		return err
	}
	list, err := s.deps.Queries.Organisations(r.Context(), pageOf(in.query))
	if err != nil {
		return err
	}
	writeList(w, list, func(o queries.Organisation) orgJSON {
		return orgJSON{ID: o.ID, Name: o.Name, CreatedAt: ts(o.CreatedAt), UpdatedAt: ts(o.UpdatedAt)}
	})
	return nil
}

func (s *Server) createPartner(w http.ResponseWriter, r *http.Request, in input) error {
	if err := requireAdmin(in.user); err != nil {
		return err
	}
	queryOrg, _ := in.query.Int("org_id")
	bodyOrg, _ := in.body.Int("org_id")
	if queryOrg != bodyOrg {
		return derrors.Invalid([]any{"body", "org_id"}, bodyOrg, "org_id must equal the org_id query parameter")
	}
	c := aggregates.CreatePartner{OrgID: bodyOrg, Role: aggregates.RolePartner, IsActive: true}
	c.FullName, _ = in.body.String("full_name")
	c.Email, _ = in.body.String("email")
	c.Phone = optionalString(in.body, "phone")
	if v, ok := in.body.String("role"); ok {
		c.Role = v
	}
	if v, ok := in.body.Bool("is_active"); ok {
		c.IsActive = v
	}
	if v, ok := in.body.Int("user_id"); ok {
		c.UserID = &v
	}
	p, res, err := s.deps.Commands.Organisations.CreatePartner(r.Context(), c)
	if err != nil {
		return err
	}
	s.settle(w, r, res, partnerReadModels...)
	writeJSON(w, http.StatusCreated, partnerJSON{ID: p.ID, OrgID: p.OrgID, FullName: p.FullName, Email: p.Email, Phone: p.Phone,
		Role: p.Role, IsActive: p.IsActive, UserID: p.UserID, CreatedAt: ts(p.CreatedAt), UpdatedAt: ts(p.UpdatedAt)})
	return nil
}

func (s *Server) requestPromotion(w http.ResponseWriter, r *http.Request, in input) error {
	c := aggregates.RequestPromotion{UserID: in.user.UserID, TargetRole: aggregates.RolePartner}
	c.Name, _ = in.body.String("name")
	c.Email, _ = in.body.String("email")
	c.OrgName, _ = in.body.String("org_name")
	c.EduCategory = optionalString(in.body, "edu_category")
	if v, ok := in.body.String("target_role"); ok {
		c.TargetRole = v
	}
	req, res, err := s.deps.Commands.Organisations.RequestPromotion(r.Context(), c)
	if err != nil {
		return err
	}
	s.settle(w, r, res, projections.PromotionsProjection)
	writeJSON(w, http.StatusCreated, promotionFromState(req))
	return nil
}

func (s *Server) listPromotions(w http.ResponseWriter, r *http.Request, in input) error {
	if err := requireAdmin(in.user); err != nil {
		return err
	}
	if err := s.awaitMinPosition(w, r, projections.PromotionsProjection); err != nil {
		return err
	}
	status, _ := in.query.String("status")
	list, err := s.deps.Queries.PromotionRequests(r.Context(), status, pageOf(in.query))
	if err != nil {
		return err
	}
	writeList(w, list, promotionFromRow)
	return nil
}

func (s *Server) approvePromotion(w http.ResponseWriter, r *http.Request, in input) error {
	if err := requireAdmin(in.user); err != nil {
		return err
	}
	id, _ := in.path.Int("request_id")
	var target aggregates.ApprovalTarget
	_, target.NewOrganisation = in.body.String("organization")
	target.OrgID, _ = in.body.Int("org_id")
	req, res, err := s.deps.Commands.Organisations.ApprovePromotion(r.Context(), id, in.user.UserID, target)
	if err != nil {
		return err
	}
	s.settle(w, r, res, promotionReadModels...)
	writeJSON(w, http.StatusOK, promotionFromState(req))
	return nil
}

func (s *Server) rejectPromotion(w http.ResponseWriter, r *http.Request, in input) error {
	if err := requireAdmin(in.user); err != nil {
		return err
	}
	id, _ := in.path.Int("request_id")
	req, res, err := s.deps.Commands.Organisations.RejectPromotion(r.Context(), id, in.user.UserID, optionalString(in.body, "reason"))
	if err != nil {
		return err
	}
	s.settle(w, r, res, projections.PromotionsProjection)
	writeJSON(w, http.StatusOK, promotionFromState(req))
	return nil
}
