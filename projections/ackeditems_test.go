package projections

import (
	"testing"

	"lectern/events"
	"lectern/eventstore"
	"lectern/eventstore/postgres"
)

// Only the events up to the position the offset's update records (its
// postgres.AckedPosition argument) are applied with it: one watermill-sql
// counted as not acked is read again.
func TestAckedItems(t *testing.T) {
	items := []setItem{
		{m: events.Meta{Position: "900-7"}},
		{m: events.Meta{Position: "900-8"}},
		{m: events.Meta{Position: "1000-3"}},
	}
	acked := func(commit, prepare uint64) []any {
		return []any{int64(prepare), "ignored", "g", postgres.AckedPosition{Group: "g", Position: eventstore.Position{Commit: commit, Prepare: prepare}}}
	}
	for _, tc := range []struct {
		name string
		args []any
		want int
	}{
		{"all acked", acked(1000, 3), 3},
		{"the last not counted", acked(900, 8), 2},
		{"an earlier offset of the same transaction", acked(900, 7), 1},
		{"a later offset of an earlier transaction", acked(900, 99), 2},
		{"no acked position among the arguments: everything", []any{int64(8), "900", "g"}, 3},
	} {
		if got := ackedItems(items, tc.args); len(got) != tc.want {
			t.Errorf("%s: %d items, want %d", tc.name, len(got), tc.want)
		}
	}
}
