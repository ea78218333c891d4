package projections

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"lectern/events"
	"lectern/personal"
)

// areasLog is a log of the classroom (courses, classes with their invite
// codes, enrollments and their drops), of organisations, partners and
// promotion requests, and of knowledge documents and their settings, their
// streams interleaved, with a user's erasure part-way and events of every
// area after it. A document's reindex request, which no read model here
// follows, leaves a gap in the versions its settings are applied at.
func areasLog() []logged {
	var log []logged
	versions := map[string]int64{}
	add := func(stream string, e events.Event) {
		versions[stream]++
		log = append(log, logged{at(stream, versions[stream]), e})
	}
	day := time.Date(2026, 9, 1, 8, 0, 0, 0, time.UTC)
	date := func(s string) *string { return &s }
	id := func(n int64) *int64 { return &n }
	text := func(s string) *string { return &s }
	settings := func(topK int, minScore string, reranker bool) events.KnowledgeSearchSettings {
		s := events.KnowledgeSearchSettings{TopK: topK, MinScore: minScore, ScoreType: "cosine", RerankerEnabled: reranker, RerankerTopN: 3}
		if reranker {
			s.RerankerModel = text("lexical")
		}
		return s
	}
	class := func(n, org, partner int64, course *int64, name string) events.ClassCreated {
		start := day.Add(time.Duration(n) * 24 * time.Hour)
		return events.ClassCreated{ClassID: n, OrgID: org, PartnerID: partner, CourseID: course, Name: name, Status: "planned",
			StartAt: &start, Capacity: id(30), Timezone: text("Europe/London"), InviteOnly: n == 1, PrimaryModelID: id(1),
			AllowedModelIDs: []int64{1, 2}, CreatedBy: 1}
	}
	code := func(class, n, org, partner int64, c string, maxUses int64) events.InviteCodeIssued {
		return events.InviteCodeIssued{ClassID: class, OrgID: org, PartnerID: partner, InviteCodeID: n, Code: c, TargetRole: "student",
			MaxUses: maxUses, Status: "active", ExpiresAt: day.Add(90 * 24 * time.Hour), CreatedBy: 1}
	}
	used := func(class, n, org int64, c string, user, enrollment, count, maxUses int64) events.InviteCodeUsed {
		status := "active"
		if count >= maxUses {
			status = "exhausted"
		}
		return events.InviteCodeUsed{ClassID: class, OrgID: org, InviteCodeID: n, Code: c, TargetRole: "student", UserID: user,
			EnrollmentID: enrollment, UsedCount: count, MaxUses: maxUses, Status: status}
	}
	enrol := func(n, class, org, partner int64, course *int64, student int64, code *int64) events.EnrollmentCreated {
		source := "partner"
		if code != nil {
			source = "invite_code"
		}
		return events.EnrollmentCreated{EnrollmentID: n, ClassID: class, OrgID: org, PartnerID: partner, CourseID: course,
			StudentID: student, InviteCodeID: code, Status: "active", EnrolledAt: day.Add(time.Duration(n) * time.Hour),
			Source: source, EnrolledBy: student}
	}
	drop := func(n, class, org, student int64) events.EnrollmentDropped {
		return events.EnrollmentDropped{EnrollmentID: n, ClassID: class, OrgID: org, StudentID: student, PreviousStatus: "active", DroppedBy: 1}
	}
	upload := func(n, user int64) events.KnowledgeDocumentUploaded {
		return events.KnowledgeDocumentUploaded{KnowledgeID: n, UserID: user, Title: fmt.Sprintf("Notes %d", n), ContentType: "text/plain",
			Size: 100 * n, ContentHash: fmt.Sprintf("%064d", n), ContentSize: 90 * n, Settings: settings(5, "0", false)}
	}

	// Creates of every kind, interleaved.
	for u := int64(1); u <= 3; u++ {
		add(fmt.Sprintf("user-%d", u), events.UserSignedUp{UserID: u, Email: fmt.Sprintf("u%d@example.com", u), Name: fmt.Sprintf("User %d", u),
			Roles: []string{"user"}})
		add(fmt.Sprintf("knowledge-%d", u), upload(u, u))
	}
	add("org-1", events.OrganisationCreated{OrgID: 1, Name: "Riverside School", CreatedBy: 1})
	add("promotion-1", events.PromotionRequested{RequestID: 1, UserID: 2, Name: "User 2", Email: "u2@example.com",
		OrgName: "riverside school", TargetRole: "partner", EduCategory: text("school")})
	add("partner-1", events.PartnerCreated{PartnerID: 1, OrgID: 1, UserID: id(1), FullName: "User 1", Email: "u1@example.com",
		Role: "partner", IsActive: true})
	add("org-2", events.OrganisationCreated{OrgID: 2, Name: "Hilltop", CreatedBy: 1})
	add("course-1", events.CourseCreated{CourseID: 1, OrgID: 1, PartnerID: 1, Title: "Algebra", CourseKey: "ALG-1", Status: "draft",
		StartDate: date("2026-09-01"), CreatedBy: 1})
	add("partner-3", events.PartnerCreated{PartnerID: 3, OrgID: 2, FullName: "Guest", Email: "guest@example.com", Phone: text("+44 1"),
		Role: "assistant", IsActive: true})
	add("class-1", class(1, 1, 1, id(1), "Algebra A"))
	add("promotion-2", events.PromotionRequested{RequestID: 2, UserID: 3, Name: "User 3", Email: "u3@example.com",
		OrgName: "Nowhere", TargetRole: "assistant"})
	add("class-1", code(1, 1, 1, 1, "ALPHA", 2))
	add("course-2", events.CourseCreated{CourseID: 2, OrgID: 2, PartnerID: 3, Title: "Biology", CourseKey: "BIO-1", Status: "draft",
		CreatedBy: 1})
	add("class-1", code(1, 2, 1, 1, "BRAVO", 5))
	add("class-2", class(2, 2, 3, nil, "Open lab"))
	add("promotion-3", events.PromotionRequested{RequestID: 3, UserID: 2, Name: "User 2", Email: "u2@example.com",
		OrgName: "Hilltop", TargetRole: "partner"})
	add("class-2", code(2, 3, 2, 3, "CHARLIE", 1))

	// Updates, uses, enrollments and drops, interleaved.
	add("enrollment-1", enrol(1, 1, 1, 1, id(1), 2, id(1)))
	add("class-1", used(1, 1, 1, "ALPHA", 2, 1, 1, 2))
	add("promotion-1", events.PromotionApproved{RequestID: 1, UserID: 2, ReviewedBy: 1, OrgID: 1, PartnerID: 2})
	add("partner-2", events.PartnerCreated{PartnerID: 2, OrgID: 1, UserID: id(2), FullName: "User 2", Email: "u2@example.com",
		Phone: text("+44 2"), Role: "partner", IsActive: true})
	add("enrollment-2", enrol(2, 1, 1, 1, id(1), 3, nil))
	add("course-1", events.CourseUpdated{CourseID: 1, OrgID: 1, Title: "Algebra I", CourseKey: "ALG-1", StartDate: date("2026-09-07"),
		EndDate: date("2026-12-18"), Description: text("Linear equations"), Changed: []string{"title", "start_date", "end_date", "description"},
		UpdatedBy: 1})
	add("knowledge-1", events.KnowledgeSettingsChanged{KnowledgeID: 1, Settings: settings(8, "0.25", true),
		Changed: []string{"top_k", "min_score", "reranker_enabled", "reranker_model"}})
	add("knowledge-5", upload(5, 3))
	add("class-2", used(2, 3, 2, "CHARLIE", 1, 3, 1, 1))
	add("enrollment-3", enrol(3, 2, 2, 3, nil, 1, id(3)))
	add("course-1", events.CourseStatusChanged{CourseID: 1, OrgID: 1, From: "draft", To: "active", ChangedBy: 1})
	add("class-1", events.ClassUpdated{ClassID: 1, OrgID: 1, CourseID: id(1), Name: "Algebra A (mornings)", Description: text("Room 4"),
		Capacity: id(25), Timezone: text("Europe/London"), Location: text("Room 4"), InviteOnly: true, PrimaryModelID: id(2),
		AllowedModelIDs: []int64{2}, Changed: []string{"name", "description", "capacity", "location", "primary_model_id", "allowed_model_ids"},
		UpdatedBy: 1})
	add("promotion-2", events.PromotionRejected{RequestID: 2, UserID: 3, ReviewedBy: 1, Reason: text("No such organisation")})
	add("knowledge-1", events.KnowledgeReindexRequested{KnowledgeID: 1, JobID: 1})
	add("enrollment-2", drop(2, 1, 1, 3))
	add("class-1", events.InviteCodeRevoked{ClassID: 1, OrgID: 1, InviteCodeID: 2, Code: "BRAVO", RevokedBy: 1})
	add("knowledge-2", events.KnowledgeSettingsChanged{KnowledgeID: 2, Settings: settings(3, "0.5", false), Changed: []string{"top_k", "min_score"}})
	add("class-1", used(1, 1, 1, "ALPHA", 1, 4, 2, 2))
	add("enrollment-4", enrol(4, 1, 1, 1, id(1), 1, id(1)))
	add("class-2", events.ClassStatusChanged{ClassID: 2, OrgID: 2, From: "planned", To: "active", ChangedBy: 1})
	add("course-2", events.CourseUpdated{CourseID: 2, OrgID: 2, Title: "Biology", CourseKey: "BIO-2", Changed: []string{"course_key"}, UpdatedBy: 1})
	add("course-2", events.CourseStatusChanged{CourseID: 2, OrgID: 2, From: "draft", To: "active", ChangedBy: 1})
	add("knowledge-1", events.KnowledgeSettingsChanged{KnowledgeID: 1, Settings: settings(4, "0.25", true), Changed: []string{"top_k"}})

	// User 2 (a partner, with two promotion requests, a document and an
	// enrollment) is erased.
	add("user-2", events.UserErased{UserID: 2, Actor: 1})

	// Every area moves on after the erasure.
	add("enrollment-1", drop(1, 1, 1, 2))
	add("promotion-3", events.PromotionRejected{RequestID: 3, UserID: 2, ReviewedBy: 1, Reason: text("Account closed")})
	add("knowledge-2", events.KnowledgeSettingsChanged{KnowledgeID: 2, Settings: settings(3, "0.5", true), Changed: []string{"reranker_enabled"}})
	add("class-1", events.ClassStatusChanged{ClassID: 1, OrgID: 1, From: "planned", To: "active", ChangedBy: 1})
	add("knowledge-4", upload(4, 1))
	add("course-1", events.CourseStatusChanged{CourseID: 1, OrgID: 1, From: "active", To: "archived", ChangedBy: 1})
	add("org-3", events.OrganisationCreated{OrgID: 3, Name: "Lakeside", CreatedBy: 1})
	add("enrollment-4", drop(4, 1, 1, 1))
	add("partner-4", events.PartnerCreated{PartnerID: 4, OrgID: 3, UserID: id(3), FullName: "User 3", Email: "u3@example.com",
		Role: "partner", IsActive: false})
	return log
}

// The live batches leave the read models of the classroom, of
// organisations (with partners and promotion requests) and of knowledge
// documents as the same log applied one event at a time does: their
// handlers (On, so set-capable) are batched live like the others'.
func TestLiveBatchesMatchOneAtATimeAcrossAreas(t *testing.T) {
	ps := mergedByName(append(append(append([]Projection{Users()}, OrganisationProjections()...), ClassroomProjections()...),
		KnowledgeProjections()...)...)
	one := checkLiveBatches(t, ps, areasLog())

	// The rows are what the log says, so the comparison is of something.
	for _, c := range []struct {
		table string
		id    int64
		want  map[string]any
	}{
		{"courses", 1, map[string]any{"title": "Algebra I", "status": "archived", "end_date": "2026-12-18", "version": 4.0}},
		{"courses", 2, map[string]any{"course_key": "BIO-2", "status": "active"}},
		{"classes", 1, map[string]any{"name": "Algebra A (mornings)", "status": "active", "capacity": 25.0, "version": 8.0}},
		{"classes", 2, map[string]any{"status": "active", "version": 4.0}},
		{"invite_codes", 1, map[string]any{"used_count": 2.0, "status": "exhausted"}},
		{"invite_codes", 2, map[string]any{"used_count": 0.0, "status": "revoked"}},
		{"invite_codes", 3, map[string]any{"used_count": 1.0, "status": "exhausted"}},
		{"enrollments", 1, map[string]any{"status": "dropped", "version": 2.0}},
		{"enrollments", 2, map[string]any{"status": "dropped"}},
		{"enrollments", 3, map[string]any{"status": "active", "source": "invite_code"}},
		{"enrollments", 4, map[string]any{"status": "dropped"}},
		{"organizations", 3, map[string]any{"name": "Lakeside"}},
		{"partners", 2, map[string]any{"full_name": personal.ErasedText, "email": erasedEmail(2), "phone": nil}},
		{"partners", 3, map[string]any{"full_name": "Guest", "phone": "+44 1"}},
		{"promotion_requests", 1, map[string]any{"status": "approved", "name": personal.ErasedText, "org_id": 1.0, "partner_id": 2.0}},
		{"promotion_requests", 2, map[string]any{"status": "rejected", "name": "User 3", "reason": "No such organisation"}},
		{"promotion_requests", 3, map[string]any{"status": "rejected", "name": personal.ErasedText, "reason": "Account closed"}},
		{"knowledge_documents", 2, map[string]any{"title": personal.ErasedText}},
		{"knowledge_documents", 4, map[string]any{"title": "Notes 4"}},
		{"knowledge_documents", 5, map[string]any{"title": "Notes 5", "user_id": 3.0}},
		{"knowledge_settings", 1, map[string]any{"top_k": 4.0, "min_score": "0.25", "reranker_enabled": true, "version": 4.0}},
		{"knowledge_settings", 2, map[string]any{"top_k": 3.0, "reranker_enabled": true, "version": 3.0}},
	} {
		key := "id"
		if c.table == "knowledge_settings" {
			key = "knowledge_id"
		}
		row := rowByKey(t, one[c.table], key, c.id)
		if row == nil {
			t.Errorf("%s: no row %d", c.table, c.id)
			continue
		}
		for col, want := range c.want {
			if got := row[col]; got != want {
				t.Errorf("%s %d: %s is %#v, want %#v", c.table, c.id, col, got, want)
			}
		}
	}
}

// rowByKey is the row of rows (to_jsonb text, see tableRows) whose key
// column is id, or nil.
func rowByKey(t *testing.T, rows []string, key string, id int64) map[string]any {
	t.Helper()
	for _, raw := range rows {
		var row map[string]any
		if err := json.Unmarshal([]byte(raw), &row); err != nil {
			t.Fatal(err)
		}
		if row[key] == float64(id) {
			return row
		}
	}
	return nil
}
