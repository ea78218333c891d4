package service_test

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"lectern/service"
)

// During a rotation of the master key the service reads subject keys that
// either master key wrapped: a replay with the new key and the previous one
// rebuilds the read models as they are, where the new key alone cannot
// open the log.
func TestReplayDuringAKeyRotation(t *testing.T) {
	oldKey, newKey := make([]byte, 32), make([]byte, 32)
	_, _ = rand.Read(oldKey)
	_, _ = rand.Read(newKey)
	e := startReplayEnvWith(t, "postgres", oldKey)
	e.workload(1)
	e.settle(t)
	before := snapshot(t, e.pool)

	// The replay is refused before it starts (the key opens no subject
	// key), or else fails on the first sealed event.
	e.cfg.DataKey = newKey
	r, closeStore, err := service.NewReplayer(context.Background(), e.cfg)
	if err == nil {
		ps, _ := service.ReplayableProjections()
		_, err = r.Replay(context.Background(), ps...)
		closeStore()
	}
	if err == nil || !strings.Contains(err.Error(), "LECTERN_DATA_KEY") {
		t.Fatalf("a replay with the new key alone: %v, want an error naming LECTERN_DATA_KEY", err)
	}

	e.cfg.PreviousDataKey = oldKey
	replay(t, e, 0)
	if diff := cmp.Diff(before, snapshot(t, e.pool)); diff != "" {
		t.Fatalf("a replay during the rotation differs (-live +replayed):\n%s", diff)
	}

	e.cfg.DataKey = nil
	if _, _, err := service.NewReplayer(context.Background(), e.cfg); err == nil {
		t.Error("a previous data key without a data key was accepted")
	}
}
