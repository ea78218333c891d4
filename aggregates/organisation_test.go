package aggregates_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"lectern/aggregates"
	"lectern/derrors"
	"lectern/events"
)

func TestOrganisationDecisions(t *testing.T) {
	got, err := aggregates.DecideCreateOrganisation(aggregates.Organisation{}, 4, "  Riverside  ", 9)
	checkErr(t, err, nil)
	if diff := cmp.Diff([]events.Event{events.OrganisationCreated{OrgID: 4, Name: "Riverside", CreatedBy: 9}}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	_, err = aggregates.DecideCreateOrganisation(aggregates.Organisation{}, 4, "  ", 9)
	checkErr(t, err, &derrors.FieldError{})
	existing := given(aggregates.EvolveOrganisation, events.OrganisationCreated{OrgID: 4, Name: "R"})
	_, err = aggregates.DecideCreateOrganisation(existing, 4, "R", 9)
	checkErr(t, err, derrors.ErrConflict)
}

func TestPartnerDecisions(t *testing.T) {
	uid := int64(3)
	c := aggregates.CreatePartner{PartnerID: 6, OrgID: 4, UserID: &uid, FullName: "Grace", Email: "g@x.io", Role: "assistant", IsActive: true}
	got, err := aggregates.DecideCreatePartner(aggregates.Partner{}, c)
	checkErr(t, err, nil)
	want := []events.Event{events.PartnerCreated{PartnerID: 6, OrgID: 4, UserID: &uid, FullName: "Grace", Email: "g@x.io", Role: "assistant", IsActive: true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	c.Role = "dean"
	_, err = aggregates.DecideCreatePartner(aggregates.Partner{}, c)
	checkErr(t, err, &derrors.FieldError{})
	_, err = aggregates.DecideCreatePartner(given(aggregates.EvolvePartner, want[0]), c)
	checkErr(t, err, derrors.ErrConflict)
}

func TestErasePartnerDecisions(t *testing.T) {
	_, err := aggregates.DecideErasePartner(aggregates.Partner{}, 1)
	checkErr(t, err, derrors.ErrNotFound)
	uid := int64(3)
	withAccount := given(aggregates.EvolvePartner, events.PartnerCreated{PartnerID: 6, OrgID: 4, UserID: &uid, FullName: "Grace", Role: "partner"})
	_, err = aggregates.DecideErasePartner(withAccount, 1)
	checkErr(t, err, derrors.ErrConflict)
	contact := events.PartnerCreated{PartnerID: 7, OrgID: 4, FullName: "Ada", Email: "a@x.io", Role: "partner"}
	got, err := aggregates.DecideErasePartner(given(aggregates.EvolvePartner, contact), 1)
	checkErr(t, err, nil)
	if diff := cmp.Diff([]events.Event{events.PartnerErased{PartnerID: 7, Actor: 1}}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	got, err = aggregates.DecideErasePartner(given(aggregates.EvolvePartner, contact, got[0]), 1)
	checkErr(t, err, nil)
	if len(got) != 0 {
		t.Errorf("erasing an erased partner recorded %v", got)
	}
}

func TestPromotionDecisions(t *testing.T) {
	requested := events.PromotionRequested{RequestID: 8, UserID: 3, Name: "Ada", Email: "a@x.io", OrgName: "R", TargetRole: "partner"}
	cases := []struct {
		name    string
		given   []events.Event
		when    func(aggregates.PromotionRequest) ([]events.Event, error)
		then    []events.Event
		wantErr error
	}{
		{"approve a pending request", []events.Event{requested},
			func(r aggregates.PromotionRequest) ([]events.Event, error) {
				return aggregates.DecideApprovePromotion(r, 1, 4, 6)
			},
			[]events.Event{events.PromotionApproved{RequestID: 8, UserID: 3, ReviewedBy: 1, OrgID: 4, PartnerID: 6}}, nil},
		{"reject a pending request with a reason", []events.Event{requested},
			func(r aggregates.PromotionRequest) ([]events.Event, error) {
				return aggregates.DecideRejectPromotion(r, 1, ptr("no"))
			},
			[]events.Event{events.PromotionRejected{RequestID: 8, UserID: 3, ReviewedBy: 1, Reason: ptr("no")}}, nil},
		{"approved requests do not move again", []events.Event{requested, events.PromotionApproved{RequestID: 8}},
			func(r aggregates.PromotionRequest) ([]events.Event, error) {
				return aggregates.DecideRejectPromotion(r, 1, nil)
			}, nil, derrors.ErrConflict},
		{"rejected requests cannot be approved", []events.Event{requested, events.PromotionRejected{RequestID: 8}},
			func(r aggregates.PromotionRequest) ([]events.Event, error) {
				return aggregates.DecideApprovePromotion(r, 1, 4, 6)
			}, nil, derrors.ErrConflict},
		{"a missing request is not found", nil,
			func(r aggregates.PromotionRequest) ([]events.Event, error) {
				return aggregates.DecideApprovePromotion(r, 1, 4, 6)
			}, nil, derrors.ErrNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.when(given(aggregates.EvolvePromotion, tc.given...))
			checkErr(t, err, tc.wantErr)
			if diff := cmp.Diff(tc.then, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
	r := given(aggregates.EvolvePromotion, requested, events.PromotionApproved{RequestID: 8, OrgID: 4, PartnerID: 6, ReviewedBy: 1})
	if r.Status != "approved" || *r.OrgID != 4 || *r.PartnerID != 6 || r.ReviewedAt == nil {
		t.Errorf("state after approval: %+v", r)
	}
}

// A request records the requester's own address, whatever it says.
func TestPromotionRecordsTheAccountEmail(t *testing.T) {
	evs, err := aggregates.DecideRequestPromotion(aggregates.PromotionRequest{}, aggregates.RequestPromotion{
		RequestID: 1, UserID: 2, Email: "someone.else@example.com", AccountEmail: "me@example.com", OrgName: "X"})
	if err != nil {
		t.Fatal(err)
	}
	if got := evs[0].(events.PromotionRequested).Email; got != "me@example.com" {
		t.Errorf("recorded %q", got)
	}
}

// Approval names its outcome: a new organisation or an existing one, never
// both and never neither (which used to join by name).
func TestApprovalTarget(t *testing.T) {
	for _, tc := range []struct {
		target aggregates.ApprovalTarget
		ok     bool
	}{
		{aggregates.ApprovalTarget{NewOrganisation: true}, true},
		{aggregates.ApprovalTarget{OrgID: 3}, true},
		{aggregates.ApprovalTarget{}, false},
		{aggregates.ApprovalTarget{NewOrganisation: true, OrgID: 3}, false},
	} {
		err := tc.target.Validate()
		var field *derrors.FieldError
		if tc.ok != (err == nil) || err != nil && !errors.As(err, &field) {
			t.Errorf("%+v: %v", tc.target, err)
		}
	}
}
