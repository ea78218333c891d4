package projections

import (
	"context"

	"github.com/jackc/pgx/v5"

	"lectern/aggregates"
	"lectern/events"
	"lectern/personal"
)

// OrganisationsProjection maintains the organizations, partners and
// promotion_requests tables: one consumer group for the area, since every
// group reads every event and pays a transaction per batch.
const OrganisationsProjection = AccountsProjection

// AccountsProjection is the consumer group of users, agents, organisations,
// partners and promotion requests: every group reads every event and pays a
// transaction per batch, so the small read models share one.
const AccountsProjection = "accounts"

// The tables' names for the same projection, so callers say which read
// model they need.
const (
	PartnersProjection   = OrganisationsProjection
	PromotionsProjection = OrganisationsProjection
)

// OrganisationProjections project organisations, partners and promotion requests.
func OrganisationProjections() []Projection {
	return []Projection{
		{Name: OrganisationsProjection, Tables: []string{"organizations", "partners", "promotion_requests"}, Handlers: []GroupHandler{
			On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.OrganisationCreated) error {
				_, err := tx.Exec(ctx, `
					INSERT INTO organizations (id, name, created_by, created_at, updated_at, version)
					VALUES ($1, $2, $3, $4, $4, $5) ON CONFLICT (id) DO NOTHING`,
					e.OrgID, e.Name, e.CreatedBy, m.RecordedAt, m.Version)
				return err
			}),
			On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.PartnerCreated) error {
				_, err := tx.Exec(ctx, `
					INSERT INTO partners (id, org_id, user_id, full_name, email, phone, role, is_active, created_at, updated_at, version)
					VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10) ON CONFLICT (id) DO NOTHING`,
					e.PartnerID, e.OrgID, e.UserID, e.FullName, e.Email, e.Phone, e.Role, e.IsActive, m.RecordedAt, m.Version)
				return err
			}),
			// The partner's record as partner.created reads at its
			// placeholders.
			On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.PartnerErased) error {
				_, err := tx.Exec(ctx, `
					UPDATE partners SET full_name = $2, email = $3, phone = NULL, updated_at = $4, version = $5
					WHERE id = $1 AND version < $5`,
					e.PartnerID, personal.ErasedText, personal.ErasedEmail(personal.PartnerSubject(e.PartnerID)), m.RecordedAt, m.Version)
				return err
			}),
			On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.PromotionRequested) error {
				_, err := tx.Exec(ctx, `
					INSERT INTO promotion_requests (id, user_id, name, email, org_name, target_role, edu_category, status, requested_at, updated_at, version)
					VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10) ON CONFLICT (id) DO NOTHING`,
					e.RequestID, e.UserID, e.Name, e.Email, e.OrgName, e.TargetRole, e.EduCategory, aggregates.PromotionPending, m.RecordedAt, m.Version)
				return err
			}),
			On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.PromotionApproved) error {
				_, err := tx.Exec(ctx, `
					UPDATE promotion_requests SET status = $2, reviewed_by = $3, reviewed_at = $4, org_id = $5, partner_id = $6,
						updated_at = $4, version = $7
					WHERE id = $1 AND version < $7`,
					e.RequestID, aggregates.PromotionApproved, e.ReviewedBy, m.RecordedAt, e.OrgID, e.PartnerID, m.Version)
				return err
			}),
			On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.PromotionRejected) error {
				_, err := tx.Exec(ctx, `
					UPDATE promotion_requests SET status = $2, reviewed_by = $3, reviewed_at = $4, reason = $5,
						updated_at = $4, version = $6
					WHERE id = $1 AND version < $6`,
					e.RequestID, aggregates.PromotionRejected, e.ReviewedBy, m.RecordedAt, e.Reason, m.Version)
				return err
			}),
			// The user's partner records (a partner without a user is a
			// subject of its own) read as partner.created at its
			// placeholders, their promotion requests as promotion.requested
			// and promotion.rejected; their streams did not move (see
			// crossStream).
			OnSet(func(ctx context.Context, tx pgx.Tx, _ []events.Meta, es []events.UserErased) error {
				ids := erasedIDs(es)
				_, err := tx.Exec(ctx, `
					UPDATE partners p SET full_name = $3, email = e.email, phone = NULL
					FROM unnest($1::bigint[], $2::text[]) AS e(user_id, email)
					WHERE p.user_id = e.user_id`,
					ids, erasedEmails(ids), personal.ErasedText)
				if err != nil {
					return err
				}
				_, err = tx.Exec(ctx, `
					UPDATE promotion_requests r SET name = $3, email = e.email, org_name = $3, edu_category = NULL, reason = NULL
					FROM unnest($1::bigint[], $2::text[]) AS e(user_id, email)
					WHERE r.user_id = e.user_id`,
					ids, erasedEmails(ids), personal.ErasedText)
				return err
			}),
		}},
	}
}
