package commands

import (
	"context"
	"sync"
	"testing"

	"lectern/pgtest"
)

// Concurrent callers share queries, yet every id is handed out once, and
// one caller's ids rise in the order it asked for them.
func TestSequencesHandOutEveryIDOnce(t *testing.T) {
	ids := NewSequences(pgtest.Fresh(t))
	const callers, each = 32, 40
	got := make([][]int64, callers)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				id, err := ids.Next(context.Background(), "agent_ids")
				if err != nil {
					t.Error(err)
					return
				}
				got[c] = append(got[c], id)
			}
		}()
	}
	wg.Wait()
	seen := map[int64]bool{}
	for c, list := range got {
		for i, id := range list {
			if seen[id] {
				t.Fatalf("id %d handed out twice", id)
			}
			seen[id] = true
			if i > 0 && id <= list[i-1] {
				t.Fatalf("caller %d got %d after %d", c, id, list[i-1])
			}
		}
	}
	if len(seen) != callers*each {
		t.Fatalf("%d ids, want %d", len(seen), callers*each)
	}

	// A caller that gives up does not hold up the others.
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ids.Next(cancelled, "agent_ids"); err == nil {
		t.Error("a cancelled caller got an id")
	}
	if _, err := ids.Next(context.Background(), "agent_ids"); err != nil {
		t.Errorf("after a cancelled caller: %v", err)
	}
	if _, err := ids.Next(context.Background(), "no_such_sequence"); err == nil {
		t.Error("a missing sequence gave an id")
	}
}
