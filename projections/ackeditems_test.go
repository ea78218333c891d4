package projections

import (
	"testing"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"

	"lectern/events"
)

// Only the events up to the position the offset's update records are
// applied with it: one watermill-sql counted as not acked is read again.
func TestAckedItems(t *testing.T) {
	items := []setItem{
		{m: events.Meta{Position: "900-7"}},
		{m: events.Meta{Position: "900-8"}},
		{m: events.Meta{Position: "1000-3"}},
	}
	for _, tc := range []struct {
		name string
		args []any
		want int
	}{
		{"all acked", []any{int64(3), "1000", "g"}, 3},
		{"the last not counted", []any{int64(8), "900", "g"}, 2},
		{"an earlier offset of the same transaction", []any{int64(7), "900", "g"}, 1},
		{"a later offset of an earlier transaction", []any{int64(99), "900", "g"}, 2},
		{"watermill-sql's own transaction id type", []any{int64(8), wsql.XID8(900), "g"}, 2},
		{"arguments of another shape: everything", []any{"x"}, 3},
	} {
		if got := ackedItems(items, tc.args); len(got) != tc.want {
			t.Errorf("%s: %d items, want %d", tc.name, len(got), tc.want)
		}
	}
}
