package api

import (
	"context"
	"net/http"

	"lectern/aggregates"
	"lectern/derrors"
	"lectern/queries"
)

var errNotPartner = derrors.New(derrors.ErrForbidden, "Not enough permissions")

// partnerFor authorises a /partner/{partner_id}/... request and returns the
// partner its path names: allowed to the partner's own user (while the
// partner is active) or an admin. Anyone else gets 403, whether or not the
// partner exists; an admin asking for a missing partner gets 404.
func (s *Server) partnerFor(ctx context.Context, in input) (queries.Partner, error) {
	caller := in.user
	partnerID, _ := in.path.Int("partner_id")
	p, err := s.deps.Queries.Partner(ctx, partnerID)
	admin := caller.HasRole(aggregates.RoleAdmin)
	switch {
	case isNotFound(err) && admin:
		return p, err
	case isNotFound(err):
		return p, errNotPartner
	case err != nil:
		return p, err
	case admin:
		return p, nil
	case p.UserID == nil || *p.UserID != caller.UserID || !p.IsActive:
		return p, errNotPartner
	}
	return p, nil
}

// partnerRead is partnerFor for the reads under /partner/{partner_id}: it
// first honours X-Min-Position for the read models they use (the partner
// record among them, as it authorises the read).
func (s *Server) partnerRead(w http.ResponseWriter, r *http.Request, in input) (queries.Partner, error) {
	if err := s.awaitMinPosition(w, r, partnerAreaReadModels...); err != nil {
		return queries.Partner{}, err
	}
	return s.partnerFor(r.Context(), in)
}

// requireAdmin allows admins only.
func requireAdmin(caller *Principal) error {
	if caller == nil || !caller.HasRole(aggregates.RoleAdmin) {
		return errNotPartner
	}
	return nil
}
