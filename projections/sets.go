package projections

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"lectern/events"
)

// Applying events set-wise, out of log order.
//
// A handler reads and writes only its event's stream's rows (see Handler),
// so events of different streams may be applied in any order as long as each
// stream's keep theirs. Both a replay and a live projection's batch (see
// pollTx) use that to apply the first event of every stream, then the
// second, and so on, each such wave one set per event type: one call of its
// handler, one statement for a SetHandler.

// setItem is one decoded event, in log order, waiting for its set.
type setItem struct {
	h      replayable
	typ    string
	stream string
	m      events.Meta
	e      any
}

// eventSet is events of one type, each of a different stream, applied by
// one call of their handler.
type eventSet struct {
	h      replayable
	ms     []events.Meta
	es     []any
	typ    string
	leader string // the first event's id, to name the set in errors
}

// groupSets sorts items, given in log order, into the sets that apply them.
// A cross-stream event (an erasure, see crossStream) is a set of its own,
// with the events before it in the log applied before it and those after
// it after.
func groupSets(items []setItem) []eventSet {
	var sets []eventSet
	from := 0
	for i := range items {
		if crossStream(items[i].typ) {
			sets = append(sets, groupWaves(items[from:i])...)
			sets = append(sets, groupWaves(items[i:i+1])...)
			from = i + 1
		}
	}
	return append(sets, groupWaves(items[from:])...)
}

// groupWaves sorts items, given in log order, into waves of sets.
func groupWaves(items []setItem) []eventSet {
	type ranked struct {
		wave, kind int // kind: the order of the type's first appearance
		*setItem
	}
	rs := make([]ranked, len(items))
	waves := map[string]int{}
	kinds := map[string]int{}
	for i := range items {
		it := &items[i]
		kind, ok := kinds[it.typ]
		if !ok {
			kind = len(kinds)
			kinds[it.typ] = kind
		}
		rs[i] = ranked{wave: waves[it.stream], kind: kind, setItem: it}
		waves[it.stream]++
	}
	slices.SortStableFunc(rs, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(a.wave, b.wave), cmp.Compare(a.kind, b.kind))
	})
	var sets []eventSet
	for len(rs) > 0 {
		n := 1
		for n < len(rs) && rs[n].wave == rs[0].wave && rs[n].kind == rs[0].kind {
			n++
		}
		set := eventSet{h: rs[0].h, ms: make([]events.Meta, n), es: make([]any, n),
			typ: rs[0].typ, leader: rs[0].m.EventID}
		for i, r := range rs[:n] {
			set.ms[i], set.es[i] = r.m, r.e
		}
		sets = append(sets, set)
		rs = rs[n:]
	}
	return sets
}

// applySets applies sets through tx, in order, and returns how many events
// they held; an error names the set's first event.
func applySets(ctx context.Context, tx *pipelineTx, sets []eventSet) (int, error) {
	applied := 0
	for _, set := range sets {
		tx.current = set.leader
		if n := len(set.es); n > 1 {
			tx.current += fmt.Sprintf(" (or one of %d more %s events)", n-1, set.typ)
		}
		if err := set.h.applyAll(ctx, tx, set.ms, set.es); err != nil {
			return applied, fmt.Errorf("event %s: %w", tx.current, err)
		}
		applied += len(set.es)
	}
	return applied, nil
}
