package queries

import (
	"context"
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
