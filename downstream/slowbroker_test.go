package downstream_test

import (
	"fmt"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"lectern/downstream"
	"lectern/pgtest"
	"lectern/service"
)

// brokerDelay is how long the slow broker takes to accept a message.
const brokerDelay = 3 * time.Second

// A broker that answers slowly holds up the forwarder, and nothing else:
// while it waits on a publish, POST /agents reads its own write as fast as
// before. (The forwarder's poll once held a transaction id from its first
// statement, and an open transaction id holds back the horizon below which
// every projection of the cluster reads.)
func TestSlowBrokerDoesNotDelayReadYourWrites(t *testing.T) {
	pool := pgtest.Fresh(t)
	publishing := make(chan struct{})
	var once sync.Once
	restore := downstream.SetBeforePublish(func() {
		once.Do(func() {
			close(publishing)
			time.Sleep(brokerDelay) // the fault under test: the broker's wait
		})
	})
	defer restore()
	h := start(t, pool, service.Config{})
	h.strict = true
	_, token := h.user("writer@example.com")
	_, admin := h.user("admin@example.com")

	createAgents := func(label string, n int) []time.Duration {
		var took []time.Duration
		for i := range n {
			start := time.Now()
			h.do(http.MethodPost, "/agents", token, fmt.Sprintf(`{"name":"%s %d","system_prompt":"p"}`, label, i), http.StatusCreated)
			took = append(took, time.Since(start))
		}
		sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
		return took
	}
	before := createAgents("before", 10)

	// A partner.created event sends the forwarder to the broker.
	org := id(h.do(http.MethodPost, "/admin/organizations", admin, `{"name":"Riverside School"}`, http.StatusCreated))
	teacherID, _ := h.user("teacher@example.com")
	h.do(http.MethodPost, fmt.Sprintf("/partner/partners?org_id=%d", org), admin,
		fmt.Sprintf(`{"org_id":%d,"full_name":"Teacher","email":"teacher@example.com","user_id":%d}`, org, teacherID), http.StatusCreated)
	<-publishing // the writes start within the broker's wait
	during := createAgents("during", 10)
	// Slowest during against slowest before plus a margin for a loaded
	// machine; the fault this catches costs the whole broker wait.
	if worst, base := during[len(during)-1], before[len(before)-1]; worst > base+brokerDelay/3 {
		t.Errorf("POST /agents during a slow publish: slowest %v, before it %v", worst, base)
	}
	t.Logf("POST /agents slowest before %v, during a %v publish %v", before[len(before)-1], brokerDelay, during[len(during)-1])
}
