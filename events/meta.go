package events

import "lectern/eventstore"

// MetaOf is the metadata of a recorded event, as handlers and folds see it.
func MetaOf(r eventstore.RecordedEvent) Meta {
	return Meta{
		EventID: r.ID.String(), StreamID: r.StreamID, Version: r.Version, Position: r.Position.String(),
		RecordedAt: r.RecordedAt, CorrelationID: r.Metadata.CorrelationID, CausationID: r.Metadata.CausationID,
		UserID: r.Metadata.UserID, RequestID: r.Metadata.RequestID,
		TraceParent: r.Metadata.TraceParent, TraceState: r.Metadata.TraceState,
	}
}
