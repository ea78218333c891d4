// Package commands holds Lectern's write use cases: load an aggregate from
// its stream, decide, append with the expected version, retry on a conflict.
package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/derrors"
	"lectern/events"
	"lectern/eventstore"
	"lectern/failpoint"
)

// maxAttempts bounds the retries of a command that lost a version race.
const maxAttempts = 5

// Deps are what every command handler needs.
type Deps struct {
	Store    eventstore.Store
	Registry *events.Registry
	DB       *pgxpool.Pool // id sequences, uniqueness claims, operational tables
	Now      func() time.Time
	IDs      *Sequences // hands out the id sequences' ids (NewSequences(DB))
}

// Validate reports every missing dependency.
func (d Deps) Validate() error {
	var err error
	if d.Store == nil {
		err = errors.Join(err, errors.New("commands: nil event store"))
	}
	if d.Registry == nil {
		err = errors.Join(err, errors.New("commands: nil event registry"))
	}
	if d.DB == nil {
		err = errors.Join(err, errors.New("commands: nil database"))
	}
	if d.Now == nil {
		err = errors.Join(err, errors.New("commands: nil clock"))
	}
	if d.IDs == nil {
		err = errors.Join(err, errors.New("commands: nil id sequences"))
	}
	return err
}

// Result is what a write reports besides the new state.
type Result struct {
	// Position is where the write left the log; zero when nothing was appended.
	Position eventstore.Position
	// Appended reports whether any event was recorded.
	Appended bool
}

type metaKey struct{}

// WithMetadata attaches the caller's request metadata to ctx; every event
// appended under ctx carries it.
func WithMetadata(ctx context.Context, m eventstore.Metadata) context.Context {
	return context.WithValue(ctx, metaKey{}, m)
}

func metadataFrom(ctx context.Context) eventstore.Metadata {
	m, _ := ctx.Value(metaKey{}).(eventstore.Metadata)
	return m
}

// load folds a stream into state.
func load[S any](ctx context.Context, d Deps, stream string, evolve func(S, events.Envelope) S) (state S, version int64, last eventstore.Position, err error) {
	recorded, err := d.Store.ReadStream(ctx, stream, eventstore.Forwards, 1, 0)
	if err != nil {
		return state, 0, last, err
	}
	for _, r := range recorded {
		e, err := d.Registry.Decode(r.Type, r.SchemaVersion, r.Data)
		if err != nil {
			return state, 0, last, fmt.Errorf("load %s: %w", stream, err)
		}
		state = evolve(state, envelope(r, e))
		version, last = r.Version, r.Position
	}
	return state, version, last, nil
}

func envelope(r eventstore.RecordedEvent, e events.Event) events.Envelope {
	return events.Envelope{
		Meta:  events.MetaOf(r),
		Event: e,
	}
}

// execute runs one command on one stream: load, decide, append at the version
// it decided on; a lost race reloads and decides again, up to maxAttempts.
// It returns the state after the new events.
func execute[S any](ctx context.Context, d Deps, stream string, evolve func(S, events.Envelope) S, decide func(S) ([]events.Event, error)) (S, Result, error) {
	return run(ctx, d, stream, false, evolve, decide)
}

// create is execute for a stream whose id was just allocated: there is
// nothing to load, and the append expects no stream.
func create[S any](ctx context.Context, d Deps, stream string, evolve func(S, events.Envelope) S, decide func(S) ([]events.Event, error)) (S, Result, error) {
	return run(ctx, d, stream, true, evolve, decide)
}

func run[S any](ctx context.Context, d Deps, stream string, fresh bool, evolve func(S, events.Envelope) S, decide func(S) ([]events.Event, error)) (S, Result, error) {
	for attempt := 1; ; attempt++ {
		var state S
		var version int64
		var last eventstore.Position
		var err error
		if !fresh || attempt > 1 {
			state, version, last, err = load(ctx, d, stream, evolve)
			if err != nil {
				return state, Result{}, err
			}
		}
		decided, err := decide(state)
		if err != nil {
			return state, Result{}, err
		}
		if len(decided) == 0 {
			return state, Result{Position: last}, nil
		}
		now := d.Now().UTC().Truncate(time.Microsecond)
		meta := metadataFrom(ctx)
		data := make([]eventstore.EventData, len(decided))
		for i, e := range decided {
			raw, err := json.Marshal(e)
			if err != nil {
				return state, Result{}, err
			}
			data[i] = eventstore.EventData{
				ID: uuid.New(), Type: e.EventType(), SchemaVersion: e.SchemaVersion(),
				Data: raw, Metadata: meta, RecordedAt: now,
			}
		}
		res, err := d.Store.Append(ctx, stream, eventstore.Exact(version), data)
		if errors.Is(err, eventstore.ErrWrongExpectedVersion) {
			if attempt < maxAttempts {
				continue
			}
			return state, Result{}, derrors.New(derrors.ErrConflict, "The resource was changed by another request; try again")
		}
		if err != nil {
			return state, Result{}, err
		}
		failpoint.Reach(failpoint.AppendCommitted)
		for i, e := range decided {
			state = evolve(state, events.Envelope{
				Meta: events.Meta{EventID: data[i].ID.String(), StreamID: stream, Version: version + int64(i) + 1,
					RecordedAt: now, UserID: meta.UserID, RequestID: meta.RequestID,
					CorrelationID: meta.CorrelationID, CausationID: meta.CausationID},
				Event: e,
			})
		}
		return state, Result{Position: res.Position, Appended: true}, nil
	}
}

// nextID allocates an id of a category from its PostgreSQL sequence.
func nextID(ctx context.Context, d Deps, sequence string) (int64, error) {
	return d.IDs.Next(ctx, sequence)
}

// claim reserves key in scope for owner; false when another owner holds it.
func claim(ctx context.Context, d Deps, scope, key, owner string) (bool, error) {
	tag, err := d.DB.Exec(ctx,
		`INSERT INTO unique_claims (scope, key, owner) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, scope, key, owner)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// release gives up a claim a failed command made.
func release(ctx context.Context, d Deps, scope, key, owner string) {
	_, _ = d.DB.Exec(context.WithoutCancel(ctx), `DELETE FROM unique_claims WHERE scope = $1 AND key = $2 AND owner = $3`, scope, key, owner)
}
