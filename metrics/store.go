package metrics

import (
	"context"
	"errors"

	"lectern/eventstore"
)

// CountingStore wraps store so that every successful Append counts its events
// by type in m (lectern_events_appended_total). Reads pass through. An
// idempotent replay of events already in the stream succeeds and is counted
// again: the counter measures accepted appends, not new rows.
func CountingStore(store eventstore.Store, m *Metrics) eventstore.Store {
	return &countingStore{Store: store, m: m}
}

type countingStore struct {
	eventstore.Store
	m *Metrics
}

func (s *countingStore) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData) (eventstore.AppendResult, error) {
	res, err := s.Store.Append(ctx, stream, expected, events)
	if err != nil {
		reason := "other"
		switch {
		case errors.Is(err, eventstore.ErrWrongExpectedVersion):
			reason = "conflict"
		case errors.Is(err, eventstore.ErrUnavailable):
			reason = "unavailable"
		case errors.Is(err, eventstore.ErrAppendTooLarge):
			reason = "too_large"
		case ctx.Err() != nil:
			return res, err // the caller gave up: not the store's failure
		}
		s.m.appendFailures.WithLabelValues(reason).Inc()
		return res, err
	}
	if len(events) == 1 {
		s.m.EventsAppended(events[0].Type, 1)
		return res, nil
	}
	byType := make(map[string]int, len(events))
	for _, e := range events {
		byType[e.Type]++
	}
	for t, n := range byType {
		s.m.EventsAppended(t, n)
	}
	return res, nil
}
