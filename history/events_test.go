package history_test

import (
	"context"
	"testing"

	"lectern/history"
)

// A sparse filter over a long log answers pages of bounded work: fewer events
// than asked (none here) and a cursor, until the events it selects come; a
// reader following the cursors gets every one of them, once, in order.
func TestPagesOfASparseFilterAreBounded(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			store := st.open(t)
			const filler = history.MaxScan + history.MaxScan/2
			for i := 0; i < filler; i += 500 {
				data := make([]string, 500)
				for j := range data {
					data[j] = `{"n":1}`
				}
				appendEvents(t, store, "user-1", "user.touched", t0, data...)
			}
			appendEvents(t, store, "class-1", "class.created", t0, `{"class_id":1}`)
			appendEvents(t, store, "user-1", "user.touched", t0, `{"n":2}`)
			appendEvents(t, store, "class-2", "class.created", t0, `{"class_id":2}`)

			q := history.Query{Filter: history.Filter{Type: "class.created"}, Limit: 10}
			var got []string
			var pages int
			for {
				page, next, more, err := history.Page(context.Background(), store, q)
				if err != nil {
					t.Fatal(err)
				}
				pages++
				for _, e := range page {
					got = append(got, e.Stream)
				}
				if !more {
					break
				}
				if next.Compare(q.After) <= 0 {
					t.Fatalf("page %d: cursor %v does not move past %v", pages, next, q.After)
				}
				q.After = next
			}
			if len(got) != 2 || got[0] != "class-1" || got[1] != "class-2" {
				t.Errorf("followed the cursors to %v, want [class-1 class-2]", got)
			}
			if pages != 2 {
				t.Errorf("%d pages, want 2: an empty one after %d events, then the rest", pages, history.MaxScan)
			}

			// A page that fills up first ends at its last event.
			page, next, more, err := history.Page(context.Background(), store, history.Query{Filter: history.Filter{Stream: "user-1"}, Limit: 3})
			if err != nil || len(page) != 3 || !more || next != page[2].Position {
				t.Errorf("a full page: %d events, more %v, next %v (want the third's position), %v", len(page), more, next, err)
			}
		})
	}
}
