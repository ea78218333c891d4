package personal

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"lectern/derrors"
	"lectern/eventstore"
)

// Store is an event store whose appends seal personal fields and whose reads
// open them: what it stores holds no personal value in clear, and what it
// reads holds each one, or its placeholder once the subject is erased.
type Store struct {
	inner  eventstore.Store
	sealer *Sealer
}

// NewStore wraps inner with sealer.
func NewStore(inner eventstore.Store, sealer *Sealer) *Store {
	return &Store{inner: inner, sealer: sealer}
}

var (
	_ eventstore.Store    = (*Store)(nil)
	_ eventstore.LogEnder = (*Store)(nil)
)

// Append implements eventstore.Store: the events go in sealed.
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, evs []eventstore.EventData) (eventstore.AppendResult, error) {
	sealed := make([]eventstore.EventData, len(evs))
	for i, e := range evs {
		data, err := s.sealer.Seal(ctx, e.Type, e.Data, e.Metadata.UserID)
		if errors.Is(err, ErrErased) {
			return eventstore.AppendResult{}, ErrSubjectErased
		}
		if err != nil {
			return eventstore.AppendResult{}, err
		}
		e.Data = data
		sealed[i] = e
	}
	return s.inner.Append(ctx, stream, expected, sealed)
}

// ErrSubjectErased is an append of personal data of an erased subject: a
// 404, as the erased user is gone.
var ErrSubjectErased = derrors.New(derrors.ErrNotFound, "The user this data is about was erased")

// ReadStream implements eventstore.Store: the events come out opened.
func (s *Store) ReadStream(ctx context.Context, stream string, dir eventstore.Direction, from int64, limit int) ([]eventstore.RecordedEvent, error) {
	evs, err := s.inner.ReadStream(ctx, stream, dir, from, limit)
	if err != nil {
		return nil, err
	}
	return evs, s.open(ctx, evs)
}

// ReadAll implements eventstore.Store: the events come out opened.
func (s *Store) ReadAll(ctx context.Context, after eventstore.Position, limit int) ([]eventstore.RecordedEvent, error) {
	evs, err := s.inner.ReadAll(ctx, after, limit)
	if err != nil {
		return nil, err
	}
	return evs, s.open(ctx, evs)
}

func (s *Store) open(ctx context.Context, evs []eventstore.RecordedEvent) error {
	if len(evs) > 1 {
		if err := s.sealer.Prefetch(ctx, evs); err != nil {
			return err
		}
	}
	for i := range evs {
		data, err := s.sealer.Open(ctx, evs[i].Type, evs[i].Data)
		if err != nil {
			return fmt.Errorf("event %s of %s: %w", evs[i].ID, evs[i].StreamID, err)
		}
		evs[i].Data = data
	}
	return nil
}

// LogEnd implements eventstore.LogEnder when the wrapped store does.
func (s *Store) LogEnd(ctx context.Context) (eventstore.Position, error) {
	if e, ok := s.inner.(eventstore.LogEnder); ok {
		return e.LogEnd(ctx)
	}
	return eventstore.Position{}, errors.New("personal: the event store cannot tell where its log ends")
}

// Unwrap is the store underneath, as stored.
func (s *Store) Unwrap() eventstore.Store { return s.inner }

var _ eventstore.LogScanner = (*Store)(nil)

// ScanAll implements eventstore.LogScanner when the wrapped store does: the
// events come out opened, as ReadAll's do. Only the events that may hold
// sealed values (Sealed) are opened; the others pass as they are stored.
func (s *Store) ScanAll(ctx context.Context, after, end eventstore.Position, limit int, fn func(*eventstore.RawEvent) error) (int, error) {
	sc, ok := s.inner.(eventstore.LogScanner)
	if !ok {
		return 0, eventstore.ErrScanUnsupported
	}
	return sc.ScanAll(ctx, after, end, limit, func(e *eventstore.RawEvent) error {
		if !bytes.Contains(e.Data, piiKey) { // Open would return it as it is
			return fn(e)
		}
		data, err := s.sealer.Open(ctx, string(e.Type), e.Data)
		if err != nil {
			return fmt.Errorf("event %s of %s: %w", e.ID, e.StreamID, err)
		}
		e.Data = data
		return fn(e)
	})
}

// Prefetching is a store whose reads of the log load, with one statement a
// page, the keys that opening the page's events will need, and leave them
// sealed: for readers that open events themselves (the registry's OpenWith),
// such as a replay, which decodes pages side by side.
type Prefetching struct {
	eventstore.Store
	sealer *Sealer
}

// NewPrefetching wraps inner.
func NewPrefetching(inner eventstore.Store, sealer *Sealer) *Prefetching {
	return &Prefetching{Store: inner, sealer: sealer}
}

// ReadAll implements eventstore.Store: the events come out as stored, their
// keys cached.
func (p *Prefetching) ReadAll(ctx context.Context, after eventstore.Position, limit int) ([]eventstore.RecordedEvent, error) {
	evs, err := p.Store.ReadAll(ctx, after, limit)
	if err != nil {
		return nil, err
	}
	return evs, p.sealer.Prefetch(ctx, evs)
}
