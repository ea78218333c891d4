package downstream_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"lectern/downstream"
	"lectern/pgtest"
	"lectern/service"
)

// A broker that does not answer holds up the forwarder, and nothing else:
// while a publish waits on it, POST /agents reads its own write (the
// harness is strict: an answer whose read models had not applied the write
// within their 2 s bound, X-Projection-Pending, fails the test). The
// forwarder's poll once held a transaction id from its first statement,
// and an open transaction id holds back the horizon below which every
// projection of the cluster reads. The broker answers only once the writes
// are done, so the test waits for no clock: with that fault, each write
// would wait out its bound and answer pending.
func TestSlowBrokerDoesNotDelayReadYourWrites(t *testing.T) {
	pool := pgtest.Fresh(t)
	publishing, answer := make(chan struct{}), make(chan struct{})
	var once sync.Once
	restore := downstream.SetBeforePublish(func() {
		once.Do(func() {
			close(publishing)
			<-answer // the fault under test: a broker that has not answered
		})
	})
	defer restore()
	defer close(answer) // before the service stops (a cleanup of start)
	h := start(t, pool, service.Config{})
	h.strict = true
	_, token := h.user("writer@example.com")
	_, admin := h.user("admin@example.com")

	// A partner.created event sends the forwarder to the broker.
	org := id(h.do(http.MethodPost, "/admin/organizations", admin, `{"name":"Riverside School"}`, http.StatusCreated))
	teacherID, _ := h.user("teacher@example.com")
	h.do(http.MethodPost, fmt.Sprintf("/partner/partners?org_id=%d", org), admin,
		fmt.Sprintf(`{"org_id":%d,"full_name":"Teacher","email":"teacher@example.com","user_id":%d}`, org, teacherID), http.StatusCreated)
	<-publishing
	for i := range 10 {
		h.do(http.MethodPost, "/agents", token, fmt.Sprintf(`{"name":"during %d","system_prompt":"p"}`, i), http.StatusCreated)
	}
}
