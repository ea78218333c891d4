package service_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// After an erasure, a replay of the log, which reads the erased user's
// personal fields as placeholders, gives the same read models as the live
// projections, which anonymised the user's rows on user.erased; on both
// stores. And the erased user's data is in none of them.
func TestReplayAfterErasure(t *testing.T) {
	for _, store := range []string{"postgres", "esdbfake"} {
		t.Run(store, func(t *testing.T) {
			key := make([]byte, 32)
			_, _ = rand.Read(key)
			e := startReplayEnvWith(t, store, key)
			e.workload(1)
			e.workload(2)
			student, err := e.svc.Identity.UserByEmail(context.Background(), "student-1@example.com")
			if err != nil {
				t.Fatal(err)
			}
			_, admin := e.user("eraser@example.com", true)
			e.c.call("POST", fmt.Sprintf("/admin/users/%d/erase", student.ID), admin, nil, 204)
			e.settle(t)
			before := snapshot(t, e.pool)
			for table, rows := range before {
				for _, row := range rows {
					if strings.Contains(row, "student-1@example.com") || strings.Contains(row, "User student-1") {
						t.Errorf("%s still holds the erased user: %s", table, row)
					}
				}
			}
			replay(t, e, 0)
			if diff := cmp.Diff(before, snapshot(t, e.pool)); diff != "" {
				t.Fatalf("after an erasure, replayed read models differ from the live ones (-live +replayed):\n%s", diff)
			}
			replay(t, e, 3) // loaders handing over to the handlers
			if diff := cmp.Diff(before, snapshot(t, e.pool)); diff != "" {
				t.Fatalf("after an erasure, a replay whose loaders handed over differs (-live +replayed):\n%s", diff)
			}
		})
	}
}
