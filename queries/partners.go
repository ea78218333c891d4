package queries

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Partner is the partners read model row.
type Partner struct {
	ID          int64
	OrgID       int64
	UserID      *int64
	FullName    string
	Email       string
	Phone       *string
	Role        string
	IsActive    bool
	CreatedAt   time.Time
	UpdatedAt   time.Time
	LastLoginAt *time.Time
}

const partnerColumns = `id, org_id, user_id, full_name, email, phone, role, is_active, created_at, updated_at, last_login_at`

func scanPartner(row pgx.Row) (Partner, error) {
	var p Partner
	err := row.Scan(&p.ID, &p.OrgID, &p.UserID, &p.FullName, &p.Email, &p.Phone, &p.Role, &p.IsActive, &p.CreatedAt, &p.UpdatedAt, &p.LastLoginAt)
	return p, err
}

// Partner reads one partner.
func (q *DB) Partner(ctx context.Context, id int64) (Partner, error) {
	p, err := scanPartner(q.pool.QueryRow(ctx, `SELECT `+partnerColumns+` FROM partners WHERE id = $1`, id))
	return p, notFound(err, "Partner")
}

// PartnerIDsOfUser lists the partner records tied to a user.
func (q *DB) PartnerIDsOfUser(ctx context.Context, userID int64) ([]int64, error) {
	rows, err := q.pool.Query(ctx, `SELECT id FROM partners WHERE user_id = $1 ORDER BY id`, userID)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if ids == nil {
		ids = []int64{}
	}
	return ids, err
}

// Organisation is the organizations read model row.
type Organisation struct {
	ID        int64
	Name      string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Organisations lists organisations by id.
func (q *DB) Organisations(ctx context.Context, p Page) (List[Organisation], error) {
	return readPage(ctx, q, p, func(r pgx.Row) (Organisation, error) {
		var o Organisation
		err := r.Scan(&o.ID, &o.Name, &o.CreatedAt, &o.UpdatedAt)
		return o, err
	}, `SELECT count(*) FROM organizations`,
		`SELECT id, name, created_at, updated_at FROM organizations ORDER BY id LIMIT $1 OFFSET $2`, p.Size, p.Offset())
}

// PromotionRequest is the promotion_requests read model row.
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
	// Matching are the organisations whose names match OrgName, ignoring
	// case and surrounding spaces: an admin chooses one explicitly, or none.
	Matching []OrganizationRef
}

// OrganizationRef names an organisation.
type OrganizationRef struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// PromotionRequests lists requests, optionally of one status, oldest first.
func (q *DB) PromotionRequests(ctx context.Context, status string, p Page) (List[PromotionRequest], error) {
	out, err := readPage(ctx, q, p, scanPromotionRequest, `SELECT count(*) FROM promotion_requests WHERE $1 = '' OR status = $1`, `
		SELECT id, user_id, name, email, org_name, target_role, edu_category, status, reason, reviewed_by, reviewed_at, org_id, partner_id, requested_at
		FROM promotion_requests p WHERE $1 = '' OR status = $1 ORDER BY id LIMIT $2 OFFSET $3`, status, p.Size, p.Offset())
	if err != nil {
		return out, err
	}
	return out, q.matchOrganizations(ctx, out.Items)
}

// OrgNameClaim is the scope of the claims (unique_claims) that keep
// organisation names unique, each under OrgNameKey of the name.
const OrgNameClaim = "org_name"

// OrgNameKey is the key an organisation's name is claimed under: the name
// ignoring case and surrounding (Unicode) spaces.
func OrgNameKey(name string) string { return strings.ToLower(strings.TrimSpace(name)) }

// matchOrganizations sets each request's Matching: the organisation that
// holds the claim on its org_name's key, the very claim an approval "new"
// would collide with (so that the two never disagree, as SQL's lower and
// btrim, which differ from Go's on Unicode, did).
func (q *DB) matchOrganizations(ctx context.Context, items []PromotionRequest) error {
	keys := make([]string, len(items))
	for i := range items {
		keys[i] = OrgNameKey(items[i].OrgName)
		items[i].Matching = []OrganizationRef{}
	}
	if len(items) == 0 {
		return nil
	}
	rows, err := q.pool.Query(ctx, `SELECT c.key, o.id, o.name FROM unique_claims c
		JOIN organizations o ON c.owner = 'org-' || o.id WHERE c.scope = $1 AND c.key = ANY($2) ORDER BY o.id`, OrgNameClaim, keys)
	if err != nil {
		return err
	}
	byKey := map[string][]OrganizationRef{}
	var key string
	var org OrganizationRef
	if _, err := pgx.ForEachRow(rows, []any{&key, &org.ID, &org.Name}, func() error {
		byKey[key] = append(byKey[key], org)
		return nil
	}); err != nil {
		return err
	}
	for i := range items {
		if m, ok := byKey[keys[i]]; ok {
			items[i].Matching = m
		}
	}
	return nil
}

func scanPromotionRequest(r pgx.Row) (PromotionRequest, error) {
	var x PromotionRequest
	err := r.Scan(&x.ID, &x.UserID, &x.Name, &x.Email, &x.OrgName, &x.TargetRole, &x.EduCategory, &x.Status, &x.Reason,
		&x.ReviewedBy, &x.ReviewedAt, &x.OrgID, &x.PartnerID, &x.RequestedAt)
	return x, err
}

// PromotionRequestsOfUser are the requests a user filed, oldest first (a
// personal export: never more than a handful).
func (q *DB) PromotionRequestsOfUser(ctx context.Context, userID int64) ([]PromotionRequest, error) {
	rows, err := q.pool.Query(ctx, `
		SELECT id, user_id, name, email, org_name, target_role, edu_category, status, reason, reviewed_by, reviewed_at, org_id, partner_id, requested_at
		FROM promotion_requests p WHERE user_id = $1 ORDER BY id`, userID)
	if err != nil {
		return nil, err
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PromotionRequest, error) { return scanPromotionRequest(r) })
	if err == nil {
		err = q.matchOrganizations(ctx, items)
	}
	return items, err
}
