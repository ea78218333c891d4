package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"lectern/aggregates"
	"lectern/events"
	"lectern/eventstore"
	"lectern/eventstore/postgres"
	"lectern/pgtest"
)

// enrollmentAnswerLost appends the next enrollment for real, then answers
// as an append whose answer was lost after the commit (a time-out).
type enrollmentAnswerLost struct {
	eventstore.Store
	armed atomic.Bool
}

func (s *enrollmentAnswerLost) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, evs []eventstore.EventData) (eventstore.AppendResult, error) {
	res, err := s.Store.Append(ctx, stream, expected, evs)
	if err == nil && strings.HasPrefix(stream, events.CategoryEnrollment+"-") && s.armed.CompareAndSwap(true, false) {
		return eventstore.AppendResult{}, fmt.Errorf("append to %s: %w", stream, context.DeadlineExceeded)
	}
	return res, err
}

// An enrollment whose append may have committed keeps its seat: released,
// the next student took it, and a class of one seat held two active
// enrollments (a review showed it, through a partner's enrollment and
// through a join).
func TestAnEnrollmentWhoseAnswerWasLostKeepsItsSeat(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Fresh(t)
	pg := postgres.New(pool, nil)
	t.Cleanup(pg.Close)
	store := &enrollmentAnswerLost{Store: pg}
	d := Deps{Store: store, Registry: events.NewRegistry(), DB: pool, Now: time.Now, IDs: NewSequences(pool)}
	c, err := NewClassroom(d)
	if err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= 4; id++ {
		raw, _ := json.Marshal(events.UserSignedUp{UserID: id, Email: fmt.Sprintf("u%d@example.com", id), Name: "u", Roles: []string{"user"}})
		if _, err := pg.Append(ctx, eventstore.StreamName(events.CategoryUser, id), eventstore.NoStream, []eventstore.EventData{{
			ID: uuid.New(), Type: events.UserSignedUp{}.EventType(), SchemaVersion: 1, Data: raw, RecordedAt: time.Now()}}); err != nil {
			t.Fatal(err)
		}
	}
	one := int64(1)
	active := func(classID int64) []int64 {
		t.Helper()
		var students []int64
		for id := int64(1); id <= 10; id++ {
			en, _, _, err := load(ctx, d, eventstore.StreamName(events.CategoryEnrollment, id), aggregates.EvolveEnrollment)
			if err != nil {
				t.Fatal(err)
			}
			if en.Exists() && en.ClassID == classID && en.Status == aggregates.EnrollmentActive {
				students = append(students, en.StudentID)
			}
		}
		return students
	}

	enrolled, _, err := c.CreateClass(ctx, aggregates.CreateClass{OrgID: 1, PartnerID: 1, CallerID: 1, Name: "One seat", Capacity: &one})
	if err != nil {
		t.Fatal(err)
	}
	store.armed.Store(true)
	if _, _, err := c.Enroll(ctx, 1, enrolled.ID, aggregates.CreateEnrollment{StudentID: 1, CallerID: 1}); err == nil {
		t.Fatal("the enrollment's lost answer was no error")
	}
	_, _, err = c.Enroll(ctx, 1, enrolled.ID, aggregates.CreateEnrollment{StudentID: 2, CallerID: 1})
	if got := active(enrolled.ID); len(got) != 1 {
		t.Errorf("enrolled class of one seat: students %v active (the second enrollment: %v)", got, err)
	}

	joined, _, err := c.CreateClass(ctx, aggregates.CreateClass{OrgID: 1, PartnerID: 1, CallerID: 1, Name: "One seat too", Capacity: &one})
	if err != nil {
		t.Fatal(err)
	}
	store.armed.Store(true)
	if _, _, err := c.Join(ctx, joined.InviteCodes[0].Code, 3, "10.0.0.1"); err == nil || !strings.Contains(err.Error(), "perhaps") {
		t.Fatalf("the join's lost answer: %v; want an error saying the enrollment may stand", err)
	}
	_, _, err = c.Enroll(ctx, 1, joined.ID, aggregates.CreateEnrollment{StudentID: 4, CallerID: 1})
	if got := active(joined.ID); len(got) != 1 {
		t.Errorf("joined class of one seat: students %v active (the partner's enrollment: %v)", got, err)
	}
}
