package projections

import (
	"context"

	"github.com/jackc/pgx/v5"

	"lectern/events"
)

// ClassroomProjection maintains the courses, classes, invite_codes and
// enrollments tables: one consumer group for the area (a persisted
// identifier), since every group reads every event and pays a transaction
// per batch.
const ClassroomProjection = "classroom"

// The read models' names for the same projection, so callers say which read
// model they need.
const (
	CoursesProjection     = ClassroomProjection
	ClassesProjection     = ClassroomProjection
	EnrollmentsProjection = ClassroomProjection
)

// ClassroomProjections project courses, classes and enrollments.
func ClassroomProjections() []Projection {
	var handlers []GroupHandler
	handlers = append(handlers, courseHandlers()...)
	handlers = append(handlers, classHandlers()...)
	handlers = append(handlers, enrollmentHandlers()...)
	return []Projection{{Name: ClassroomProjection, Tables: []string{"courses", "classes", "invite_codes", "enrollments"}, Handlers: handlers}}
}

// courseHandlers project courses into the courses table.
func courseHandlers() []GroupHandler {
	return []GroupHandler{
		On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.CourseCreated) error {
			_, err := tx.Exec(ctx, `
				INSERT INTO courses (id, org_id, partner_id, title, course_key, status, start_date, end_date, description,
					created_by, created_at, updated_at, version)
				VALUES ($1, $2, $3, $4, $5, $6, $7::date, $8::date, $9, $10, $11, $11, $12)
				ON CONFLICT (id) DO NOTHING`,
				e.CourseID, e.OrgID, e.PartnerID, e.Title, e.CourseKey, e.Status, e.StartDate, e.EndDate, e.Description,
				e.CreatedBy, m.RecordedAt, m.Version)
			return err
		}),
		On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.CourseUpdated) error {
			_, err := tx.Exec(ctx, `
				UPDATE courses SET title = $2, course_key = $3, start_date = $4::date, end_date = $5::date, description = $6,
					updated_at = $7, version = $8
				WHERE id = $1 AND version < $8`,
				e.CourseID, e.Title, e.CourseKey, e.StartDate, e.EndDate, e.Description, m.RecordedAt, m.Version)
			return err
		}),
		On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.CourseStatusChanged) error {
			_, err := tx.Exec(ctx, `
				UPDATE courses SET status = $2, updated_at = $3, version = $4
				WHERE id = $1 AND version < $4`,
				e.CourseID, e.To, m.RecordedAt, m.Version)
			return err
		}),
	}
}

// touchClass records that an event of the class's stream was applied: the
// class's updated_at follows every event of its stream, as the aggregate's does.
func touchClass(ctx context.Context, tx pgx.Tx, m events.Meta, classID int64) error {
	_, err := tx.Exec(ctx, `UPDATE classes SET updated_at = $2, version = $3 WHERE id = $1 AND version < $3`,
		classID, m.RecordedAt, m.Version)
	return err
}

// classHandlers project classes and their invite codes into the classes and
// invite_codes tables.
func classHandlers() []GroupHandler {
	return []GroupHandler{
		On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.ClassCreated) error {
			ids := e.AllowedModelIDs
			if ids == nil {
				ids = []int64{}
			}
			_, err := tx.Exec(ctx, `
				INSERT INTO classes (id, org_id, partner_id, course_id, name, description, status, start_at, end_at, capacity,
					timezone, location, online_url, invite_only, primary_model_id, allowed_model_ids, created_by,
					created_at, updated_at, version)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $18, $19)
				ON CONFLICT (id) DO NOTHING`,
				e.ClassID, e.OrgID, e.PartnerID, e.CourseID, e.Name, e.Description, e.Status, e.StartAt, e.EndAt, e.Capacity,
				e.Timezone, e.Location, e.OnlineURL, e.InviteOnly, e.PrimaryModelID, ids, e.CreatedBy,
				m.RecordedAt, m.Version)
			return err
		}),
		On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.ClassUpdated) error {
			ids := e.AllowedModelIDs
			if ids == nil {
				ids = []int64{}
			}
			_, err := tx.Exec(ctx, `
				UPDATE classes SET course_id = $2, name = $3, description = $4, start_at = $5, end_at = $6, capacity = $7,
					timezone = $8, location = $9, online_url = $10, invite_only = $11, primary_model_id = $12,
					allowed_model_ids = $13, updated_at = $14, version = $15
				WHERE id = $1 AND version < $15`,
				e.ClassID, e.CourseID, e.Name, e.Description, e.StartAt, e.EndAt, e.Capacity,
				e.Timezone, e.Location, e.OnlineURL, e.InviteOnly, e.PrimaryModelID, ids, m.RecordedAt, m.Version)
			return err
		}),
		On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.ClassStatusChanged) error {
			_, err := tx.Exec(ctx, `
				UPDATE classes SET status = $2, updated_at = $3, version = $4
				WHERE id = $1 AND version < $4`,
				e.ClassID, e.To, m.RecordedAt, m.Version)
			return err
		}),
		On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.InviteCodeIssued) error {
			if _, err := tx.Exec(ctx, `
				INSERT INTO invite_codes (id, class_id, org_id, partner_id, code, target_role, max_uses, used_count, status,
					expires_at, created_by, created_at, updated_at, version)
				VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $8, $9, $10, $11, $11, $12)
				ON CONFLICT (id) DO NOTHING`,
				e.InviteCodeID, e.ClassID, e.OrgID, e.PartnerID, e.Code, e.TargetRole, e.MaxUses, e.Status,
				e.ExpiresAt, e.CreatedBy, m.RecordedAt, m.Version); err != nil {
				return err
			}
			return touchClass(ctx, tx, m, e.ClassID)
		}),
		On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.InviteCodeUsed) error {
			if _, err := tx.Exec(ctx, `
				UPDATE invite_codes SET used_count = $2, status = $3, updated_at = $4, version = $5
				WHERE id = $1 AND version < $5`,
				e.InviteCodeID, e.UsedCount, e.Status, m.RecordedAt, m.Version); err != nil {
				return err
			}
			return touchClass(ctx, tx, m, e.ClassID)
		}),
		On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.InviteCodeRevoked) error {
			if _, err := tx.Exec(ctx, `
				UPDATE invite_codes SET status = 'revoked', updated_at = $2, version = $3
				WHERE id = $1 AND version < $3`,
				e.InviteCodeID, m.RecordedAt, m.Version); err != nil {
				return err
			}
			return touchClass(ctx, tx, m, e.ClassID)
		}),
		On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.InviteCodeLimitsChanged) error {
			if _, err := tx.Exec(ctx, `
				UPDATE invite_codes SET max_uses = $2, expires_at = $3, status = $4, updated_at = $5, version = $6
				WHERE id = $1 AND version < $6`,
				e.InviteCodeID, e.MaxUses, e.ExpiresAt, e.Status, m.RecordedAt, m.Version); err != nil {
				return err
			}
			return touchClass(ctx, tx, m, e.ClassID)
		}),
	}
}

// enrollmentHandlers project enrollments into the enrollments table.
func enrollmentHandlers() []GroupHandler {
	return []GroupHandler{
		On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.EnrollmentCreated) error {
			_, err := tx.Exec(ctx, `
				INSERT INTO enrollments (id, class_id, org_id, partner_id, course_id, student_id, invite_code_id, status,
					enrolled_at, completed_at, source, enrolled_by, created_at, updated_at, version)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13, $14)
				ON CONFLICT (id) DO NOTHING`,
				e.EnrollmentID, e.ClassID, e.OrgID, e.PartnerID, e.CourseID, e.StudentID, e.InviteCodeID, e.Status,
				e.EnrolledAt, e.CompletedAt, e.Source, e.EnrolledBy, m.RecordedAt, m.Version)
			return err
		}),
		On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.EnrollmentDropped) error {
			_, err := tx.Exec(ctx, `
				UPDATE enrollments SET status = 'dropped', updated_at = $2, version = $3
				WHERE id = $1 AND version < $3`,
				e.EnrollmentID, m.RecordedAt, m.Version)
			return err
		}),
	}
}
