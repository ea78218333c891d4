package personal

import (
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
		s.sealer.forgetIfErasure(evs[i].Type, evs[i].Data) // see Opening
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
//
// The keys are loaded as a page reader's are, one statement for many
// events: from the first sealed event on, events are copied into a batch
// (scanBatchEvents of them, scanBatchBytes of their bytes at most: the scan's
// memory stays flat), whose subjects' keys are prefetched before its events
// are opened and passed on in order. Until a sealed event comes, events
// pass as they arrive, uncopied.
func (s *Store) ScanAll(ctx context.Context, after, end eventstore.Position, limit int, fn func(*eventstore.RawEvent) error) (int, error) {
	sc, ok := s.inner.(eventstore.LogScanner)
	if !ok {
		return 0, eventstore.ErrScanUnsupported
	}
	b := &scanBatch{sealer: s.sealer, fn: fn}
	_, err := sc.ScanAll(ctx, after, end, limit, func(e *eventstore.RawEvent) error {
		sealed := Sealed(string(e.Type), e.Data)
		if !sealed && len(b.evs) == 0 { // Open would return it as it is
			b.sealer.forgetIfErasure(string(e.Type), e.Data)
			b.passed++
			return fn(e)
		}
		b.add(e, sealed)
		if len(b.evs) >= scanBatchEvents || len(b.arena) >= scanBatchBytes {
			return b.flush(ctx)
		}
		return nil
	})
	if err == nil {
		err = b.flush(ctx)
	}
	return b.passed, err
}

// A batch of ScanAll holds at most scanBatchEvents events, or, past
// scanBatchBytes of their text (an event is at most
// eventstore.MaxAppendBytes), is passed on.
const (
	scanBatchEvents = 1000
	scanBatchBytes  = 4 << 20
)

// scanBatch is ScanAll's batch: copies of the events it has not passed on
// yet, their text in one arena, and the subjects of the sealed ones.
type scanBatch struct {
	sealer   *Sealer
	fn       func(*eventstore.RawEvent) error
	evs      []batched
	arena    []byte
	subjects []string
	ms       []member
	passed   int
}

// batched is an event of a batch: its text members are offsets in the
// arena (which may move as it grows) until the batch is passed on.
type batched struct {
	e                        eventstore.RawEvent
	stream, typ, data, meta  int // where each ends in the arena
	sealed, nilData, nilMeta bool
}

// add copies e, which is valid only during the call, into the batch.
func (b *scanBatch) add(e *eventstore.RawEvent, sealed bool) {
	x := batched{e: *e, sealed: sealed, nilData: e.Data == nil, nilMeta: e.Metadata == nil}
	x.e.StreamID, x.e.Type, x.e.Data, x.e.Metadata = nil, nil, nil, nil
	b.arena = append(b.arena, e.StreamID...)
	x.stream = len(b.arena)
	b.arena = append(b.arena, e.Type...)
	x.typ = len(b.arena)
	b.arena = append(b.arena, e.Data...)
	x.data = len(b.arena)
	b.arena = append(b.arena, e.Metadata...)
	x.meta = len(b.arena)
	b.evs = append(b.evs, x)
	if sealed {
		b.subjects, b.ms = appendSubjects(b.subjects, e.Data, b.ms)
	}
}

// flush loads the keys of the batch's subjects, in one statement, then opens
// its events and passes them on, in order.
func (b *scanBatch) flush(ctx context.Context) error {
	if len(b.evs) == 0 {
		return nil
	}
	if err := b.sealer.prefetch(ctx, b.subjects); err != nil {
		return err
	}
	start := 0
	for i := range b.evs {
		x := &b.evs[i]
		e := &x.e
		e.StreamID = b.arena[start:x.stream:x.stream]
		e.Type = b.arena[x.stream:x.typ:x.typ]
		if !x.nilData {
			e.Data = b.arena[x.typ:x.data:x.data]
		}
		if !x.nilMeta {
			e.Metadata = b.arena[x.data:x.meta:x.meta]
		}
		start = x.meta
		b.sealer.forgetIfErasure(string(e.Type), e.Data)
		if x.sealed {
			data, err := b.sealer.openSealed(ctx, string(e.Type), e.Data) // x.sealed: Sealed said so
			if err != nil {
				return fmt.Errorf("event %s of %s: %w", e.ID, e.StreamID, err)
			}
			e.Data = data
		}
		if err := b.fn(e); err != nil {
			return err
		}
		b.passed++
	}
	clear(b.evs) // no event's copy outlives its batch
	b.evs, b.arena, b.subjects = b.evs[:0], b.arena[:0], b.subjects[:0]
	return nil
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
// keys cached. An erasure event in the page makes the keys forget its
// subject's key first (see Opening): pages are read in log order but may be
// decoded out of it, so the pages after it must not find the key cached by
// the time they are decoded. (Events before it that are decoded afterwards
// read as erased: the erasure anonymises their rows either way.)
func (p *Prefetching) ReadAll(ctx context.Context, after eventstore.Position, limit int) ([]eventstore.RecordedEvent, error) {
	evs, err := p.Store.ReadAll(ctx, after, limit)
	if err != nil {
		return nil, err
	}
	for i := range evs {
		p.sealer.forgetIfErasure(evs[i].Type, evs[i].Data)
	}
	return evs, p.sealer.Prefetch(ctx, evs)
}
