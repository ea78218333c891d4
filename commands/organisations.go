package commands

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"lectern/aggregates"
	"lectern/derrors"
	"lectern/events"
	"lectern/eventstore"
	"lectern/personal"
	"lectern/queries"
	"lectern/ratelimit"
)

// Uniqueness claim scopes of this area.
const (
	orgNameScope     = queries.OrgNameClaim
	partnerUserScope = "partner_user_org"
	decisionScope    = "promotion_decision"
)

// Organisations is the organisations, partners and promotion requests use cases.
type Organisations struct {
	d          Deps
	limiter    *ratelimit.Limiter
	promotions ratelimit.Rate // Limits.PromotionRequests
}

// NewOrganisations refuses missing dependencies.
func NewOrganisations(d Deps) (*Organisations, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &Organisations{d: d, limiter: ratelimit.New(d.DB, d.Now), promotions: d.Limits.withDefaults().PromotionRequests}, nil
}

// PromotionBucket is the token bucket of a user's partner-role requests
// (erasure deletes it; the export shows it).
func PromotionBucket(userID int64) string {
	return "promotion-requests:" + strconv.FormatInt(userID, 10)
}

func orgStream(id int64) string       { return eventstore.StreamName(events.CategoryOrganisation, id) }
func partnerStream(id int64) string   { return eventstore.StreamName(events.CategoryPartner, id) }
func promotionStream(id int64) string { return eventstore.StreamName(events.CategoryPromotion, id) }

// streamID parses the id out of a claim owner ("partner-7").
func streamID(stream string) (int64, error) {
	_, id, _ := strings.Cut(stream, "-")
	return strconv.ParseInt(id, 10, 64)
}

// CreateOrganisation creates an organisation; names are unique (ignoring case).
func (o *Organisations) CreateOrganisation(ctx context.Context, name string, by int64) (aggregates.Organisation, Result, error) {
	id, err := nextID(ctx, o.d, "org_ids")
	if err != nil {
		return aggregates.Organisation{}, Result{}, err
	}
	stream, key := orgStream(id), queries.OrgNameKey(name)
	ok, err := claim(ctx, o.d, orgNameScope, key, stream)
	if err != nil {
		return aggregates.Organisation{}, Result{}, err
	}
	if !ok {
		return aggregates.Organisation{}, Result{}, derrors.New(derrors.ErrConflict, "An organization with this name already exists")
	}
	org, res, err := create(ctx, o.d, stream, aggregates.EvolveOrganisation, func(s aggregates.Organisation) ([]events.Event, error) {
		return aggregates.DecideCreateOrganisation(s, id, name, by)
	})
	if err != nil {
		release(ctx, o.d, orgNameScope, key, stream)
	}
	return org, res, err
}

// Organisation loads an organisation's aggregate.
func (o *Organisations) Organisation(ctx context.Context, id int64) (aggregates.Organisation, error) {
	org, _, _, err := load(ctx, o.d, orgStream(id), aggregates.EvolveOrganisation)
	if err == nil && !org.Exists() {
		return org, derrors.New(derrors.ErrNotFound, "Organization not found")
	}
	return org, err
}

// CreatePartner creates a partner of an existing organisation. A user is a
// partner of an organisation at most once; the user is granted the role.
func (o *Organisations) CreatePartner(ctx context.Context, c aggregates.CreatePartner) (aggregates.Partner, Result, error) {
	if _, err := o.Organisation(ctx, c.OrgID); err != nil {
		return aggregates.Partner{}, Result{}, err
	}
	if c.UserID != nil {
		u, _, _, err := load(ctx, o.d, eventstore.StreamName(events.CategoryUser, *c.UserID), aggregates.EvolveUser)
		if err != nil {
			return aggregates.Partner{}, Result{}, err
		}
		if !u.Exists() {
			return aggregates.Partner{}, Result{}, derrors.New(derrors.ErrNotFound, "User not found")
		}
	}
	id, err := nextID(ctx, o.d, "partner_ids")
	if err != nil {
		return aggregates.Partner{}, Result{}, err
	}
	c.PartnerID = id
	stream := partnerStream(id)
	var key string
	if c.UserID != nil {
		key = strconv.FormatInt(*c.UserID, 10) + ":" + strconv.FormatInt(c.OrgID, 10)
		ok, err := claim(ctx, o.d, partnerUserScope, key, stream)
		if err != nil {
			return aggregates.Partner{}, Result{}, err
		}
		if !ok {
			return aggregates.Partner{}, Result{}, derrors.New(derrors.ErrConflict, "This user is already a partner of this organization")
		}
	}
	p, res, err := create(ctx, o.d, stream, aggregates.EvolvePartner, func(s aggregates.Partner) ([]events.Event, error) {
		return aggregates.DecideCreatePartner(s, c)
	})
	if err != nil {
		if key != "" {
			release(ctx, o.d, partnerUserScope, key, stream)
		}
		return p, res, err
	}
	if c.UserID != nil {
		// The role follows the partner record; granting it again is a no-op.
		_, granted, err := execute(ctx, o.d, eventstore.StreamName(events.CategoryUser, *c.UserID), aggregates.EvolveUser,
			func(u aggregates.User) ([]events.Event, error) { return aggregates.DecideGrantRole(u, c.Role) })
		if err != nil {
			return p, res, err
		}
		if granted.Appended {
			res = granted // the later position: waiting for it covers both
		}
	}
	return p, res, nil
}

// RequestPromotion files a user's request for a role.
func (o *Organisations) RequestPromotion(ctx context.Context, c aggregates.RequestPromotion) (aggregates.PromotionRequest, Result, error) {
	if err := allow(ctx, o.limiter, PromotionBucket(c.UserID), o.promotions,
		"Too many partner-role requests; wait for the admins' decision, or try again later"); err != nil {
		return aggregates.PromotionRequest{}, Result{}, err
	}
	id, err := nextID(ctx, o.d, "promotion_ids")
	if err != nil {
		return aggregates.PromotionRequest{}, Result{}, err
	}
	c.RequestID = id
	user, _, _, err := load(ctx, o.d, eventstore.StreamName(events.CategoryUser, c.UserID), aggregates.EvolveUser)
	if err != nil {
		return aggregates.PromotionRequest{}, Result{}, err
	}
	c.AccountEmail = user.Email
	return create(ctx, o.d, promotionStream(id), aggregates.EvolvePromotion, func(r aggregates.PromotionRequest) ([]events.Event, error) {
		return aggregates.DecideRequestPromotion(r, c)
	})
}

// ApprovePromotion approves a pending request: the requester becomes a
// partner, with the requested role, of a new organisation named as the
// request asks (409 if that name is taken), or of the existing organisation
// the admin chose by id; the request records both. An erased requester's
// request is 404, before anything is made.
func (o *Organisations) ApprovePromotion(ctx context.Context, requestID, by int64, target aggregates.ApprovalTarget) (req aggregates.PromotionRequest, res Result, err error) {
	if err := target.Validate(); err != nil {
		return req, res, err
	}
	err = o.deciding(ctx, requestID, func() error {
		req, res, err = o.approve(ctx, requestID, by, target)
		return err
	})
	return req, res, err
}

func (o *Organisations) approve(ctx context.Context, requestID, by int64, target aggregates.ApprovalTarget) (aggregates.PromotionRequest, Result, error) {
	req, _, _, err := load(ctx, o.d, promotionStream(requestID), aggregates.EvolvePromotion)
	if err != nil {
		return req, Result{}, err
	}
	if _, err := aggregates.DecideApprovePromotion(req, by, 0, 0); err != nil {
		return req, Result{}, err
	}
	requester, _, _, err := load(ctx, o.d, eventstore.StreamName(events.CategoryUser, req.UserID), aggregates.EvolveUser)
	if err != nil {
		return req, Result{}, err
	}
	if requester.Erased {
		return req, Result{}, personal.ErrSubjectErased
	}
	orgID := target.OrgID
	if target.NewOrganisation {
		org, _, err := o.CreateOrganisation(ctx, req.OrgName, by)
		if errors.Is(err, derrors.ErrConflict) {
			return req, Result{}, derrors.New(derrors.ErrConflict,
				"An organization named %q already exists: approve with its org_id to make the requester its partner, or reject the request", req.OrgName)
		}
		if err != nil {
			return req, Result{}, err
		}
		orgID = org.ID
	} else if _, err := o.Organisation(ctx, orgID); err != nil {
		return req, Result{}, err
	}
	partnerID, err := o.partnerFor(ctx, req, orgID)
	if err != nil {
		return req, Result{}, err
	}
	return execute(ctx, o.d, promotionStream(requestID), aggregates.EvolvePromotion, func(r aggregates.PromotionRequest) ([]events.Event, error) {
		return aggregates.DecideApprovePromotion(r, by, orgID, partnerID)
	})
}

// deciding runs decide while the request is claimed for a decision (a row
// of unique_claims, so across replicas, and no connection held while decide
// runs): an approval makes the organisation, the partner record and the
// role before it records itself, and a rejection or another approval of the
// same request must not come in between and leave them behind. A decision
// made while another is under way is a 409. A claim that outlives
// decisionLease was left by a process that stopped mid-decision: the next
// decision takes it over.
func (o *Organisations) deciding(ctx context.Context, requestID int64, decide func() error) error {
	key, owner := strconv.FormatInt(requestID, 10), uuid.NewString()
	ok, err := claim(ctx, o.d, decisionScope, key, owner)
	if err == nil && !ok {
		var tag pgconn.CommandTag
		tag, err = o.d.DB.Exec(ctx, `DELETE FROM unique_claims WHERE scope = $1 AND key = $2
			AND claimed_at < now() - make_interval(secs => $3)`, decisionScope, key, decisionLease.Seconds())
		if err == nil && tag.RowsAffected() == 1 {
			ok, err = claim(ctx, o.d, decisionScope, key, owner)
		}
	}
	if err != nil {
		return err
	}
	if !ok {
		return derrors.New(derrors.ErrConflict, "Another decision on this promotion request is under way")
	}
	defer release(ctx, o.d, decisionScope, key, owner)
	return decide()
}

// decisionLease bounds how long a decision's claim on its request holds
// against the next (see deciding); a decision takes well under a second.
const decisionLease = time.Minute

// partnerFor returns the requester's partner record in the organisation,
// creating it when there is none.
func (o *Organisations) partnerFor(ctx context.Context, req aggregates.PromotionRequest, orgID int64) (int64, error) {
	key := strconv.FormatInt(req.UserID, 10) + ":" + strconv.FormatInt(orgID, 10)
	if owner, err := claimOwner(ctx, o.d, partnerUserScope, key); err != nil || owner != "" {
		if err != nil {
			return 0, err
		}
		return streamID(owner)
	}
	userID := req.UserID
	p, _, err := o.CreatePartner(ctx, aggregates.CreatePartner{OrgID: orgID, UserID: &userID, FullName: req.Name,
		Email: req.Email, Role: req.TargetRole, IsActive: true})
	if errors.Is(err, derrors.ErrConflict) {
		owner, cerr := claimOwner(ctx, o.d, partnerUserScope, key)
		if cerr == nil && owner != "" {
			return streamID(owner)
		}
	}
	return p.ID, err
}

// RejectPromotion rejects a pending request.
func (o *Organisations) RejectPromotion(ctx context.Context, requestID, by int64, reason *string) (req aggregates.PromotionRequest, res Result, err error) {
	err = o.deciding(ctx, requestID, func() error {
		req, res, err = execute(ctx, o.d, promotionStream(requestID), aggregates.EvolvePromotion, func(r aggregates.PromotionRequest) ([]events.Event, error) {
			return aggregates.DecideRejectPromotion(r, by, reason)
		})
		return err
	})
	return req, res, err
}
