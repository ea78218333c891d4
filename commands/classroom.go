package commands

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"lectern/aggregates"
	"lectern/derrors"
	"lectern/events"
	"lectern/eventstore"
	"lectern/ratelimit"
)

// Uniqueness claim scopes of the classroom.
const (
	// courseKeyScope keys are "<org_id>:<course_key>", owned by the course's stream.
	courseKeyScope = "course_key"
	// inviteCodeScope keys are the code, owned by the class's stream.
	inviteCodeScope = "invite_code"
	// activeEnrollmentScope, the seats', is seatReservations' (seats.go).
)

// Classroom is the courses, classes, invite codes and enrollments use cases.
type Classroom struct {
	d       Deps
	limiter *ratelimit.Limiter
	// limits are d.Limits with their defaults: the Join limits are
	// Classroom's (tests from one address).
	limits Limits
}

// NewClassroom refuses missing dependencies.
func NewClassroom(d Deps) (*Classroom, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &Classroom{d: d, limiter: ratelimit.New(d.DB, d.Now), limits: d.Limits.withDefaults()}, nil
}

// Now is the service's clock, by which invite codes expire.
func (c *Classroom) Now() time.Time { return c.d.Now() }

func (c *Classroom) now() time.Time { return c.d.Now().UTC().Truncate(time.Microsecond) }

// catalogue is the ids of the models a class may name (nil without a
// gateway: nothing to check them against).
func (c *Classroom) catalogue() []int64 {
	if c.d.Gateway == nil {
		return nil
	}
	var ids []int64
	for _, m := range c.d.Gateway.Catalogue().Models() {
		ids = append(ids, m.ID)
	}
	return ids
}

var (
	errCourseNotFound = derrors.New(derrors.ErrNotFound, "Course not found")
	errClassNotFound  = derrors.New(derrors.ErrNotFound, "Class not found")
)

func courseKeyClaim(orgID int64, key string) string { return strconv.FormatInt(orgID, 10) + ":" + key }

// claimOwned claims key for owner: conflict when another owner holds it.
// fresh reports whether this call made the claim (a claim owner already held
// is not fresh, and must not be released when the command fails).
func (c *Classroom) claimOwned(ctx context.Context, scope, key, owner, conflict string) (fresh bool, err error) {
	ok, err := claim(ctx, c.d, scope, key, owner)
	if err != nil || ok {
		return ok, err
	}
	holder, err := claimOwner(ctx, c.d, scope, key)
	switch {
	case err != nil:
		return false, err
	case holder == "":
		// Released in between: try once more.
		return c.claimOwned(ctx, scope, key, owner, conflict)
	case holder == owner:
		return false, nil
	}
	return false, derrors.New(derrors.ErrConflict, "%s", conflict)
}

// loadCourse reads a course of orgID; another organisation's is not found.
func (c *Classroom) loadCourse(ctx context.Context, orgID, courseID int64) (aggregates.Course, error) {
	course, _, _, err := load(ctx, c.d, eventstore.StreamName(events.CategoryCourse, courseID), aggregates.EvolveCourse)
	if err != nil {
		return course, err
	}
	if !course.Exists() || course.OrgID != orgID {
		return course, errCourseNotFound
	}
	return course, nil
}

// loadClass reads a class of orgID; another organisation's is not found.
func (c *Classroom) loadClass(ctx context.Context, orgID, classID int64) (aggregates.Class, error) {
	class, _, _, err := load(ctx, c.d, eventstore.StreamName(events.CategoryClass, classID), aggregates.EvolveClass)
	if err != nil {
		return class, err
	}
	if !class.Exists() || class.OrgID != orgID {
		return class, errClassNotFound
	}
	return class, nil
}

const duplicateCourseKey = "A course with this course_key already exists in the organisation"

// CreateCourse creates a course; its key is unique in the organisation.
func (c *Classroom) CreateCourse(ctx context.Context, cmd aggregates.CreateCourse) (aggregates.Course, Result, error) {
	id, err := nextID(ctx, c.d, "course_ids")
	if err != nil {
		return aggregates.Course{}, Result{}, err
	}
	cmd.CourseID = id
	stream := eventstore.StreamName(events.CategoryCourse, id)
	key := courseKeyClaim(cmd.OrgID, cmd.CourseKey)
	// The stream's id is new, or (under an Idempotency-Key) an earlier
	// attempt's of this request: a claim it already holds is that attempt's,
	// and this command's to give up if it fails.
	if _, err := c.claimOwned(ctx, courseKeyScope, key, stream, duplicateCourseKey); err != nil {
		return aggregates.Course{}, Result{}, err
	}
	course, res, err := create(ctx, c.d, stream, aggregates.EvolveCourse,
		func(s aggregates.Course) ([]events.Event, error) { return aggregates.DecideCreateCourse(s, cmd) })
	if err != nil {
		release(ctx, c.d, courseKeyScope, key, stream)
	}
	return course, res, err
}

// UpdateCourse applies a merge update. A new course key is claimed before
// the append, and the key it replaced is released after it.
func (c *Classroom) UpdateCourse(ctx context.Context, cmd aggregates.UpdateCourse) (aggregates.Course, Result, error) {
	stream := eventstore.StreamName(events.CategoryCourse, cmd.CourseID)
	current, err := c.loadCourse(ctx, cmd.OrgID, cmd.CourseID)
	if err != nil {
		return current, Result{}, err
	}
	var newKey string
	fresh := false
	if cmd.CourseKey.Set && cmd.CourseKey.Value != current.CourseKey && strings.TrimSpace(cmd.CourseKey.Value) != "" {
		newKey = courseKeyClaim(cmd.OrgID, cmd.CourseKey.Value)
		if fresh, err = c.claimOwned(ctx, courseKeyScope, newKey, stream, duplicateCourseKey); err != nil {
			return current, Result{}, err
		}
	}
	var replaced string // the key the successful decision replaced
	course, res, err := execute(ctx, c.d, stream, aggregates.EvolveCourse, func(s aggregates.Course) ([]events.Event, error) {
		replaced = s.CourseKey
		return aggregates.DecideUpdateCourse(s, cmd)
	})
	if err != nil {
		if fresh {
			release(ctx, c.d, courseKeyScope, newKey, stream)
		}
		return course, res, err
	}
	if replaced != course.CourseKey {
		release(ctx, c.d, courseKeyScope, courseKeyClaim(course.OrgID, replaced), stream)
	} else if fresh && newKey != courseKeyClaim(course.OrgID, course.CourseKey) {
		// Nothing changed the key after all (a concurrent update got there first).
		release(ctx, c.d, courseKeyScope, newKey, stream)
	}
	return course, res, nil
}

// newInviteCode draws a code that no other class holds and claims it for stream.
func (c *Classroom) newInviteCode(ctx context.Context, stream string) (aggregates.NewInviteCode, error) {
	id, err := nextID(ctx, c.d, "invite_code_ids")
	if err != nil {
		return aggregates.NewInviteCode{}, err
	}
	for range 10 {
		code, err := randomCode()
		if err != nil {
			return aggregates.NewInviteCode{}, err
		}
		ok, err := claim(ctx, c.d, inviteCodeScope, code, stream)
		if err != nil {
			return aggregates.NewInviteCode{}, err
		}
		if ok {
			return aggregates.NewInviteCode{ID: id, Code: code}, nil
		}
	}
	return aggregates.NewInviteCode{}, errors.New("no free invite code after 10 draws")
}

// randomCode is InviteCodeLength characters of the unambiguous alphabet,
// from a cryptographically secure source.
func randomCode() (string, error) {
	alphabet := aggregates.InviteCodeAlphabet
	n := big.NewInt(int64(len(alphabet)))
	var b strings.Builder
	for range aggregates.InviteCodeLength {
		i, err := rand.Int(rand.Reader, n)
		if err != nil {
			return "", err
		}
		b.WriteByte(alphabet[i.Int64()])
	}
	return b.String(), nil
}

// NormalizeInviteCode is the form codes are stored and looked up in: codes
// are upper case, and clients may type them in any case.
func NormalizeInviteCode(code string) string { return strings.ToUpper(strings.TrimSpace(code)) }

// CreateClass creates a class with its default invite codes. A course, if
// given, must belong to the organisation.
func (c *Classroom) CreateClass(ctx context.Context, cmd aggregates.CreateClass) (aggregates.Class, Result, error) {
	if cmd.CourseID != nil {
		course, err := c.loadCourse(ctx, cmd.OrgID, *cmd.CourseID)
		if err != nil {
			return aggregates.Class{}, Result{}, err
		}
		if err := course.CheckTakesClasses(); err != nil {
			return aggregates.Class{}, Result{}, err
		}
	}
	id, err := nextID(ctx, c.d, "class_ids")
	if err != nil {
		return aggregates.Class{}, Result{}, err
	}
	cmd.ClassID = id
	cmd.Catalogue = c.catalogue()
	stream := eventstore.StreamName(events.CategoryClass, id)
	var claimed []string
	releaseCodes := func() {
		for _, code := range claimed {
			release(ctx, c.d, inviteCodeScope, code, stream)
		}
	}
	for _, dst := range []*aggregates.NewInviteCode{&cmd.StudentCode, &cmd.AssistantCode} {
		if *dst, err = c.newInviteCode(ctx, stream); err != nil {
			releaseCodes()
			return aggregates.Class{}, Result{}, err
		}
		claimed = append(claimed, dst.Code)
	}
	cmd.Now = c.now()
	class, res, err := create(ctx, c.d, stream, aggregates.EvolveClass,
		func(s aggregates.Class) ([]events.Event, error) { return aggregates.DecideCreateClass(s, cmd) })
	if err != nil {
		releaseCodes()
		return class, res, err
	}
	for _, code := range claimed {
		if _, ok := class.Code(code); !ok {
			// A retry that found the class its dead attempt created, with
			// that attempt's codes: the codes drawn now go unused.
			release(ctx, c.d, inviteCodeScope, code, stream)
		}
	}
	return class, res, nil
}

// UpdateClass applies a merge update. A new course must belong to the
// class's organisation.
func (c *Classroom) UpdateClass(ctx context.Context, cmd aggregates.UpdateClass) (aggregates.Class, Result, error) {
	cmd.Catalogue = c.catalogue()
	class, err := c.loadClass(ctx, cmd.OrgID, cmd.ClassID)
	if err != nil {
		return aggregates.Class{}, Result{}, err
	}
	if cmd.CourseID.Set && cmd.CourseID.Value != nil {
		course, err := c.loadCourse(ctx, cmd.OrgID, *cmd.CourseID.Value)
		if err != nil {
			return aggregates.Class{}, Result{}, err
		}
		if moved := class.CourseID == nil || *class.CourseID != course.ID; moved {
			if err := course.CheckTakesClasses(); err != nil {
				return aggregates.Class{}, Result{}, err
			}
		}
	}
	return execute(ctx, c.d, eventstore.StreamName(events.CategoryClass, cmd.ClassID), aggregates.EvolveClass,
		func(s aggregates.Class) ([]events.Event, error) { return aggregates.DecideUpdateClass(s, cmd) })
}

// RevokeInviteCode withdraws an invite code of a class.
func (c *Classroom) RevokeInviteCode(ctx context.Context, cmd aggregates.RevokeInviteCode) (aggregates.Class, Result, error) {
	return execute(ctx, c.d, eventstore.StreamName(events.CategoryClass, cmd.ClassID), aggregates.EvolveClass,
		func(s aggregates.Class) ([]events.Event, error) { return aggregates.DecideRevokeInviteCode(s, cmd) })
}

// seats are the classes' seats: the capacity and one-active-enrollment
// rule, which spans a class and its enrollments.
func (c *Classroom) seats() seatReservations { return seatReservations{db: c.d.DB, store: c.d.Store} }

// Enroll enrolls a student in a class of orgID. The student must have an
// account; an active enrollment takes the student's one active place in the
// class and a seat under its capacity.
func (c *Classroom) Enroll(ctx context.Context, orgID, classID int64, cmd aggregates.CreateEnrollment) (aggregates.Enrollment, Result, error) {
	class, err := c.loadClass(ctx, orgID, classID)
	if err != nil {
		return aggregates.Enrollment{}, Result{}, err
	}
	cmd.Class = class
	student, _, _, err := load(ctx, c.d, eventstore.StreamName(events.CategoryUser, cmd.StudentID), aggregates.EvolveUser)
	if err != nil {
		return aggregates.Enrollment{}, Result{}, err
	}
	if !student.Exists() || student.Erased { // an erased user is gone
		return aggregates.Enrollment{}, Result{}, derrors.New(derrors.ErrNotFound, "Student not found")
	}
	cmd.Now = c.now()
	if cmd.Source == "" {
		cmd.Source = aggregates.SourcePartner
	}
	// Refuse bad input before taking a seat.
	if _, err := aggregates.DecideCreateEnrollment(aggregates.Enrollment{}, cmd); err != nil {
		return aggregates.Enrollment{}, Result{}, err
	}
	id, err := nextID(ctx, c.d, "enrollment_ids")
	if err != nil {
		return aggregates.Enrollment{}, Result{}, err
	}
	cmd.EnrollmentID = id
	stream := eventstore.StreamName(events.CategoryEnrollment, id)
	active := cmd.Status == nil || *cmd.Status == aggregates.EnrollmentActive
	if active {
		if err := c.seats().Reserve(ctx, class, cmd.StudentID, stream); err != nil {
			return aggregates.Enrollment{}, Result{}, err
		}
	}
	en, res, err := create(ctx, c.d, stream, aggregates.EvolveEnrollment,
		func(s aggregates.Enrollment) ([]events.Event, error) {
			return aggregates.DecideCreateEnrollment(s, cmd)
		})
	if err != nil && active && wroteNothing(err) {
		// Else the enrollment may stand (an answer lost after the commit):
		// its seat stays taken, freed later if its stream stays empty
		// (abandoned seats).
		c.seats().Release(ctx, class.ID, cmd.StudentID, stream)
	}
	return en, res, err
}

var errCodeNotFound = derrors.New(derrors.ErrNotFound, "Invite code not found")

// Join enrolls the caller as a student of the class an invite code belongs
// to. The use is counted on the class's stream with optimistic concurrency,
// so concurrent joins never exceed the code's max_uses. The returned result
// is the enrollment's append, which follows the class's.
//
// Invite codes are secrets that can be guessed: joins are limited per
// client address addr and per user, and a user's failed joins count toward
// a lockout of that user's joins (Limits).
func (c *Classroom) Join(ctx context.Context, code string, userID int64, addr string) (aggregates.Enrollment, Result, error) {
	failure, err := c.limitJoin(ctx, userID, addr)
	if err != nil {
		return aggregates.Enrollment{}, Result{}, err
	}
	en, res, err := c.join(ctx, code, userID)
	if err == nil || !(errors.Is(err, derrors.ErrNotFound) || errors.Is(err, derrors.ErrConflict)) {
		// A join, or the service's own failure: not a guess that missed.
		if rerr := c.limiter.Return(context.WithoutCancel(ctx), failure); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	return en, res, err
}

// limitJoin takes a token from the address's and the user's buckets, and
// counts the join as a failure up front (so that concurrent guesses cannot
// all pass a check none of them has counted against yet); Join gives the
// failure back when it was none.
func (c *Classroom) limitJoin(ctx context.Context, userID int64, addr string) (ratelimit.Hit, error) {
	lim := c.limits
	for _, b := range []struct {
		bucket string
		rate   ratelimit.Rate
	}{
		{"join-addr:" + addr, lim.JoinAddress},
		{JoinUserBucket(userID), lim.JoinUser},
	} {
		if err := allow(ctx, c.limiter, b.bucket, b.rate, tooManyRequests); err != nil {
			return ratelimit.Hit{}, err
		}
	}
	hit, d, err := c.limiter.Take(ctx, JoinFailBucket(userID), lim.JoinFailures)
	if err != nil {
		return ratelimit.Hit{}, err
	}
	if !d.OK {
		return ratelimit.Hit{}, &derrors.RateLimitedError{RetryAfter: d.RetryAfter, Detail: "Too many failed attempts to join a class; try again later"}
	}
	return hit, nil
}

// JoinFailBucket is the sliding window of a user's failed attempts to join
// a class (the export shows it; erasure deletes it).
func JoinFailBucket(userID int64) string { return "join-fail:" + strconv.FormatInt(userID, 10) }

// JoinUserBucket is the token bucket of a user's attempts to join a class.
func JoinUserBucket(userID int64) string { return "join-user:" + strconv.FormatInt(userID, 10) }

func (c *Classroom) join(ctx context.Context, code string, userID int64) (aggregates.Enrollment, Result, error) {
	code = NormalizeInviteCode(code)
	classStream, err := claimOwner(ctx, c.d, inviteCodeScope, code)
	if err != nil {
		return aggregates.Enrollment{}, Result{}, err
	}
	if classStream == "" {
		return aggregates.Enrollment{}, Result{}, errCodeNotFound
	}
	class, _, _, err := load(ctx, c.d, classStream, aggregates.EvolveClass)
	if err != nil {
		return aggregates.Enrollment{}, Result{}, err
	}
	if _, ok := class.Code(code); !ok {
		// Claimed by a class whose creation failed.
		return aggregates.Enrollment{}, Result{}, errCodeNotFound
	}
	use := aggregates.UseInviteCode{Code: code, UserID: userID, Now: c.now()}
	// Refuse a code that cannot be used before taking a seat; unless the use
	// was recorded by an attempt of this request that died after it (the
	// code may be used up by that very use).
	if _, err := aggregates.DecideUseInviteCode(class, use); err != nil {
		again, aerr := appliedBefore(ctx, c.d, classStream)
		if aerr != nil {
			return aggregates.Enrollment{}, Result{}, aerr
		}
		if !again {
			return aggregates.Enrollment{}, Result{}, err
		}
	}
	id, err := nextID(ctx, c.d, "enrollment_ids")
	if err != nil {
		return aggregates.Enrollment{}, Result{}, err
	}
	use.EnrollmentID = id
	stream := eventstore.StreamName(events.CategoryEnrollment, id)
	if err := c.seats().Reserve(ctx, class, userID, stream); err != nil {
		return aggregates.Enrollment{}, Result{}, err
	}
	classID := class.ID
	class, _, err = execute(ctx, c.d, classStream, aggregates.EvolveClass,
		func(s aggregates.Class) ([]events.Event, error) { return aggregates.DecideUseInviteCode(s, use) })
	if err != nil {
		if wroteNothing(err) {
			c.seats().Release(ctx, classID, userID, stream)
		}
		return aggregates.Enrollment{}, Result{}, err
	}
	invite, _ := class.Code(code)
	cmd := aggregates.CreateEnrollment{
		EnrollmentID: id, Class: class, StudentID: userID, InviteCodeID: &invite.ID,
		Source: aggregates.SourceInviteCode, CallerID: userID, Now: use.Now,
	}
	en, res, err := create(ctx, c.d, stream, aggregates.EvolveEnrollment,
		func(s aggregates.Enrollment) ([]events.Event, error) {
			return aggregates.DecideCreateEnrollment(s, cmd)
		})
	if err != nil {
		// The use stays counted: the class's history already holds it.
		if !wroteNothing(err) {
			return en, res, fmt.Errorf("join class %d: the invite code use was recorded, the enrollment perhaps: %w", class.ID, err)
		}
		c.seats().Release(ctx, classID, userID, stream)
		return en, res, fmt.Errorf("join class %d: the invite code use was recorded but the enrollment was not: %w", class.ID, err)
	}
	return en, res, nil
}

// DropEnrollment drops an enrollment and frees the student's active place
// in the class.
func (c *Classroom) DropEnrollment(ctx context.Context, cmd aggregates.DropEnrollment) (aggregates.Enrollment, Result, error) {
	stream := eventstore.StreamName(events.CategoryEnrollment, cmd.EnrollmentID)
	en, res, err := execute(ctx, c.d, stream, aggregates.EvolveEnrollment,
		func(s aggregates.Enrollment) ([]events.Event, error) { return aggregates.DecideDropEnrollment(s, cmd) })
	if err != nil {
		return en, res, err
	}
	// Only this stream's own claim is released (owner check).
	c.seats().Release(ctx, en.ClassID, en.StudentID, stream)
	return en, res, nil
}
