package history

import (
	"context"
	"fmt"

	"lectern/eventstore"
)

// copyPage is how many events Copy reads from the source log at a time.
const copyPage = 500

// copyBatchBytes caps the payload of one append to the target: EventStoreDB
// refuses appends over its max append size (1 MiB by default).
const copyBatchBytes = 512 << 10

// Copy appends every event of from's global log to to, in log order, each to
// its own stream with its own id, type, data, metadata, schema version and
// recorded time, expecting the stream to be at the event's version - 1. Runs
// of consecutive events of one stream go in one append.
//
// Re-running Copy is safe: an event already in the target is appended again
// at the same version with the same id, which the target accepts as a retry
// and writes nothing for. A target stream holding a different event at a
// version fails the copy with eventstore.ErrWrongExpectedVersion.
//
// Copy first waits for the source's transactions in flight to end (when it is
// an eventstore.LogEnder), then reads until the log is exhausted, so writers
// should be stopped first (or Copy re-run after they are). progress, when not nil, is
// called after each page with the number of source events handled so far.
// Copy returns how many events it newly wrote to the target.
func Copy(ctx context.Context, from, to eventstore.Store, progress func(n int)) (int, error) {
	// heads is each target stream's last version as far as Copy knows: read
	// once per stream, then advanced by Copy's own appends.
	heads := map[string]int64{}
	head := func(stream string) (int64, error) {
		if v, ok := heads[stream]; ok {
			return v, nil
		}
		last, err := to.ReadStream(ctx, stream, eventstore.Backwards, 0, 1)
		if err != nil {
			return 0, fmt.Errorf("history: copy: read target stream %q: %w", stream, err)
		}
		var v int64
		if len(last) == 1 {
			v = last[0].Version
		}
		heads[stream] = v
		return v, nil
	}

	// Reading until the log reads empty is only the whole log once the
	// transactions in flight have ended: the PostgreSQL log stops below the
	// cluster-wide pg_snapshot_xmin horizon, so one open transaction (in any
	// database of the cluster) hides every event committed after it began,
	// and the copy would end early, short and silent.
	if e, ok := from.(eventstore.LogEnder); ok {
		if _, err := e.LogEnd(ctx); err != nil {
			return 0, fmt.Errorf("history: copy: %w", err)
		}
	}
	copied, seen := 0, 0
	var after eventstore.Position
	for {
		page, err := from.ReadAll(ctx, after, copyPage)
		if err != nil {
			return copied, fmt.Errorf("history: copy: read source after %v: %w", after, err)
		}
		if len(page) == 0 {
			return copied, nil
		}
		for i := 0; i < len(page); {
			first := page[i]
			h, err := head(first.StreamID)
			if err != nil {
				return copied, err
			}
			// A run: consecutive versions of one stream, all already in the
			// target or all new (a retry must match the target exactly).
			present := first.Version <= h
			size := len(first.Data)
			j := i + 1
			for ; j < len(page); j++ {
				e := page[j]
				if e.StreamID != first.StreamID || e.Version != page[j-1].Version+1 ||
					(e.Version <= h) != present || size+len(e.Data) > copyBatchBytes {
					break
				}
				size += len(e.Data)
			}
			run := page[i:j]
			evs := make([]eventstore.EventData, len(run))
			for k, e := range run {
				evs[k] = eventstore.EventData{
					ID:            e.ID,
					Type:          e.Type,
					SchemaVersion: e.SchemaVersion,
					Data:          e.Data,
					Metadata:      e.Metadata,
					RecordedAt:    e.RecordedAt,
				}
			}
			res, err := to.Append(ctx, first.StreamID, eventstore.Exact(first.Version-1), evs)
			if err != nil {
				return copied, fmt.Errorf("history: copy: %s versions %d-%d: %w", first.StreamID, first.Version, run[len(run)-1].Version, err)
			}
			if !present {
				copied += len(run)
			}
			heads[first.StreamID] = max(h, res.Version)
			i = j
		}
		seen += len(page)
		after = page[len(page)-1].Position
		if progress != nil {
			progress(seen)
		}
	}
}
