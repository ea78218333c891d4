package queries

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Course is the courses read model row.
type Course struct {
	ID          int64
	OrgID       int64
	PartnerID   int64
	Title       string
	CourseKey   string
	Status      string
	StartDate   *time.Time
	EndDate     *time.Time
	Description *string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

const courseColumns = `id, org_id, partner_id, title, course_key, status, start_date, end_date, description, created_at, updated_at`

func scanCourse(row pgx.Row) (Course, error) {
	var c Course
	err := row.Scan(&c.ID, &c.OrgID, &c.PartnerID, &c.Title, &c.CourseKey, &c.Status, &c.StartDate, &c.EndDate,
		&c.Description, &c.CreatedAt, &c.UpdatedAt)
	return c, err
}

// Course reads one course of an organisation; another organisation's course
// is not found.
func (q *DB) Course(ctx context.Context, orgID, id int64) (Course, error) {
	c, err := scanCourse(q.pool.QueryRow(ctx, `SELECT `+courseColumns+` FROM courses WHERE id = $1 AND org_id = $2`, id, orgID))
	return c, notFound(err, "Course")
}

// Courses lists an organisation's courses, oldest first.
func (q *DB) Courses(ctx context.Context, orgID int64, p Page) (List[Course], error) {
	return readPage(ctx, q, p, scanCourse, `SELECT count(*) FROM courses WHERE org_id = $1`,
		`SELECT `+courseColumns+` FROM courses WHERE org_id = $1 ORDER BY id LIMIT $2 OFFSET $3`, orgID, p.Size, p.Offset())
}

// InviteCode is the invite_codes read model row.
type InviteCode struct {
	ID         int64
	ClassID    int64
	PartnerID  int64
	Code       string
	TargetRole string
	MaxUses    int64
	UsedCount  int64
	Status     string // as recorded; an active code past ExpiresAt reads as expired
	ExpiresAt  time.Time
	CreatedBy  int64
	CreatedAt  time.Time
}

// Class is the classes read model row with its invite codes.
type Class struct {
	ID              int64
	OrgID           int64
	PartnerID       int64
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
	CreatedAt       time.Time
	UpdatedAt       time.Time
	InviteCodes     []InviteCode
}

const classColumns = `id, org_id, partner_id, course_id, name, description, status, start_at, end_at, capacity, timezone,
	location, online_url, invite_only, primary_model_id, allowed_model_ids, created_at, updated_at`

func scanClass(row pgx.Row) (Class, error) {
	var c Class
	err := row.Scan(&c.ID, &c.OrgID, &c.PartnerID, &c.CourseID, &c.Name, &c.Description, &c.Status, &c.StartAt, &c.EndAt,
		&c.Capacity, &c.Timezone, &c.Location, &c.OnlineURL, &c.InviteOnly, &c.PrimaryModelID, &c.AllowedModelIDs,
		&c.CreatedAt, &c.UpdatedAt)
	if c.AllowedModelIDs == nil {
		c.AllowedModelIDs = []int64{}
	}
	c.InviteCodes = []InviteCode{}
	return c, err
}

// Class reads one class of an organisation with its invite codes; another
// organisation's class is not found.
func (q *DB) Class(ctx context.Context, orgID, id int64) (Class, error) {
	c, err := scanClass(q.pool.QueryRow(ctx, `SELECT `+classColumns+` FROM classes WHERE id = $1 AND org_id = $2`, id, orgID))
	if err != nil {
		return c, notFound(err, "Class")
	}
	classes := []Class{c}
	err = q.withInviteCodes(ctx, classes)
	return classes[0], err
}

// Classes lists an organisation's classes with their invite codes, oldest first.
func (q *DB) Classes(ctx context.Context, orgID int64, p Page) (List[Class], error) {
	out, err := readPage(ctx, q, p, scanClass, `SELECT count(*) FROM classes WHERE org_id = $1`,
		`SELECT `+classColumns+` FROM classes WHERE org_id = $1 ORDER BY id LIMIT $2 OFFSET $3`, orgID, p.Size, p.Offset())
	if err != nil {
		return out, err
	}
	return out, q.withInviteCodes(ctx, out.Items)
}

// withInviteCodes fills in the invite codes of classes, in one query.
func (q *DB) withInviteCodes(ctx context.Context, classes []Class) error {
	if len(classes) == 0 {
		return nil
	}
	at := make(map[int64]int, len(classes))
	ids := make([]int64, len(classes))
	for i, c := range classes {
		at[c.ID], ids[i] = i, c.ID
	}
	rows, err := q.pool.Query(ctx, `
		SELECT id, class_id, partner_id, code, target_role, max_uses, used_count, status, expires_at, created_by, created_at
		FROM invite_codes WHERE class_id = ANY($1) ORDER BY class_id, id`, ids)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var ic InviteCode
		if err := rows.Scan(&ic.ID, &ic.ClassID, &ic.PartnerID, &ic.Code, &ic.TargetRole, &ic.MaxUses, &ic.UsedCount,
			&ic.Status, &ic.ExpiresAt, &ic.CreatedBy, &ic.CreatedAt); err != nil {
			return err
		}
		c := &classes[at[ic.ClassID]]
		c.InviteCodes = append(c.InviteCodes, ic)
	}
	return rows.Err()
}

// Enrollment is the enrollments read model row.
type Enrollment struct {
	ID           int64
	ClassID      int64
	OrgID        int64
	StudentID    int64
	InviteCodeID *int64
	Status       string
	EnrolledAt   time.Time
	CompletedAt  *time.Time
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

const enrollmentColumns = `id, class_id, org_id, student_id, invite_code_id, status, enrolled_at, completed_at, created_at, updated_at`

func scanEnrollment(row pgx.Row) (Enrollment, error) {
	var e Enrollment
	err := row.Scan(&e.ID, &e.ClassID, &e.OrgID, &e.StudentID, &e.InviteCodeID, &e.Status, &e.EnrolledAt, &e.CompletedAt,
		&e.CreatedAt, &e.UpdatedAt)
	return e, err
}

// ClassEnrollments lists a class's enrollments, oldest first.
func (q *DB) ClassEnrollments(ctx context.Context, classID int64, p Page) (List[Enrollment], error) {
	return readPage(ctx, q, p, scanEnrollment, `SELECT count(*) FROM enrollments WHERE class_id = $1`,
		`SELECT `+enrollmentColumns+` FROM enrollments WHERE class_id = $1 ORDER BY id LIMIT $2 OFFSET $3`, classID, p.Size, p.Offset())
}

// StudentEnrollments lists a student's enrollments, oldest first.
func (q *DB) StudentEnrollments(ctx context.Context, studentID int64, p Page) (List[Enrollment], error) {
	return readPage(ctx, q, p, scanEnrollment, `SELECT count(*) FROM enrollments WHERE student_id = $1`,
		`SELECT `+enrollmentColumns+` FROM enrollments WHERE student_id = $1 ORDER BY id LIMIT $2 OFFSET $3`, studentID, p.Size, p.Offset())
}

// ActivePartnerOrgs lists the organisations a user is an active partner of.
func (q *DB) ActivePartnerOrgs(ctx context.Context, userID int64) ([]int64, error) {
	rows, err := q.pool.Query(ctx, `SELECT DISTINCT org_id FROM partners WHERE user_id = $1 AND is_active ORDER BY org_id`, userID)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if ids == nil {
		ids = []int64{}
	}
	return ids, err
}
