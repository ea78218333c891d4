package downstream_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	"lectern/pgtest"
	"lectern/service"
)

// A user's erasure is published, after what was published of them, so that
// subscribers erase it too: its data names the user alone.
func TestErasureIsPublished(t *testing.T) {
	pool := pgtest.Fresh(t)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	h := start(t, pool, service.Config{DataKey: key})
	sub := sqlSubscriber(t, pool, "erasure")
	_, admin := h.user("admin@example.com")
	teacherID, _ := h.user("teacher@example.com")
	org := id(h.do(http.MethodPost, "/admin/organizations", admin, `{"name":"Riverside School"}`, http.StatusCreated))
	h.do(http.MethodPost, fmt.Sprintf("/partner/partners?org_id=%d", org), admin,
		fmt.Sprintf(`{"org_id":%d,"full_name":"Teacher","email":"teacher@example.com","user_id":%d}`, org, teacherID), http.StatusCreated)
	h.do(http.MethodPost, fmt.Sprintf("/admin/users/%d/erase", teacherID), admin, "", http.StatusNoContent)

	var eventID string
	if err := pool.QueryRow(context.Background(), `SELECT uuid::text FROM events WHERE event_type = 'user.erased' AND stream_id = $1`,
		fmt.Sprintf("user-%d", teacherID)).Scan(&eventID); err != nil {
		t.Fatalf("no user.erased event: %v", err)
	}
	got := receive(t, sub, 2, 15*time.Second)
	if got[0].CE.Type() != "lectern.partner.created" {
		t.Fatalf("first message %s, want the partner's creation", got[0].CE.Type())
	}
	erased := got[1]
	if ce := erased.CE; ce.Type() != "lectern.user.erased" || ce.ID() != eventID || erased.UUID != eventID ||
		ce.Subject() != fmt.Sprintf("user-%d", teacherID) || ce.DataContentType() != "application/json" {
		t.Fatalf("message type %s id %s (uuid %s) subject %s datacontenttype %s; want lectern.user.erased, the event's id %s, user-%d",
			ce.Type(), ce.ID(), erased.UUID, ce.Subject(), ce.DataContentType(), eventID, teacherID)
	}
	var raw struct{ Data map[string]any }
	if err := json.Unmarshal(erased.Payload, &raw); err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"user_id": float64(teacherID)}; !reflect.DeepEqual(raw.Data, want) {
		t.Fatalf("data %v, want %v", raw.Data, want)
	}
}

// A partner without an account erased is published after its creation;
// the data names the partner alone.
func TestPartnerErasureIsPublished(t *testing.T) {
	pool := pgtest.Fresh(t)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	h := start(t, pool, service.Config{DataKey: key})
	sub := sqlSubscriber(t, pool, "partner-erasure")
	_, admin := h.user("admin@example.com")
	org := id(h.do(http.MethodPost, "/admin/organizations", admin, `{"name":"Riverside School"}`, http.StatusCreated))
	partner := id(h.do(http.MethodPost, fmt.Sprintf("/partner/partners?org_id=%d", org), admin,
		fmt.Sprintf(`{"org_id":%d,"full_name":"Contact","email":"contact@example.com","phone":"+44 1"}`, org), http.StatusCreated))
	h.do(http.MethodPost, fmt.Sprintf("/admin/partners/%d/erase", partner), admin, "", http.StatusNoContent)

	got := receive(t, sub, 2, 15*time.Second)
	if got[0].CE.Type() != "lectern.partner.created" || got[1].CE.Type() != "lectern.partner.erased" {
		t.Fatalf("messages %s, %s; want the partner's creation, then its erasure", got[0].CE.Type(), got[1].CE.Type())
	}
	var raw struct{ Data map[string]any }
	if err := json.Unmarshal(got[1].Payload, &raw); err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"partner_id": float64(partner)}; !reflect.DeepEqual(raw.Data, want) {
		t.Fatalf("data %v, want %v", raw.Data, want)
	}
}
