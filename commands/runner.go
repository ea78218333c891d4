// Package commands holds Lectern's write use cases: load an aggregate from
// its stream, decide, append with the expected version, retry on a conflict.
package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"lectern/auth"
	"lectern/blobs"
	"lectern/derrors"
	"lectern/events"
	"lectern/eventstore"
	"lectern/failpoint"
	"lectern/knowledge"
	"lectern/llm"
	"lectern/mail"
	"lectern/queries"
	"lectern/tracing"
)

// maxAttempts bounds the retries of a command that lost a version race.
const maxAttempts = 5

// Deps are what the handlers are built from (New). Every handler needs the
// first five; the rest are some handlers' own, and each constructor refuses
// those it needs when they are missing.
type Deps struct {
	Store    eventstore.Store
	Registry *events.Registry
	DB       *pgxpool.Pool // id sequences, uniqueness claims, operational tables
	Now      func() time.Time
	IDs      *Sequences // hands out the id sequences' ids (NewSequences(DB))
	// Observer, optional, hears of the version conflicts commands meet
	// (metrics.Metrics).
	Observer Observer

	// Reads are the read models a practice turn reads (Sessions).
	Reads *queries.DB
	// Search retrieves the passages that ground a practice turn (Sessions).
	Search *queries.KnowledgeSearch
	// Gateway calls the models (Sessions).
	Gateway *llm.Gateway
	// Embedder and Blobs index documents and keep their texts (Knowledge,
	// KnowledgeJobs).
	Embedder knowledge.Embedder
	Blobs    *blobs.Store
	// Tokens, Mail and AdminEmails are Identity's: AdminEmails become admins
	// when they sign up.
	Tokens      *auth.Tokens
	Mail        mail.Sender
	AdminEmails []string
	// Limits override DefaultLimits (Identity, Classroom).
	Limits Limits
	// Keys are the subjects' data keys (Erasure); nil: no data key, and New
	// builds no Erasure.
	Keys SubjectEraser
	// Logger logs what happens out of a request's sight (Identity,
	// KnowledgeJobs).
	Logger *slog.Logger
}

// Observer hears what a command's run does besides appending.
type Observer interface {
	// VersionConflict: a command's append lost a version race; retried
	// reports whether it decides again, or gives up with a 409 after
	// maxAttempts.
	VersionConflict(retried bool)
}

// Validate reports every missing dependency that every handler needs.
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
	state, version, last, _, err = loadUntil(ctx, d, stream, evolve, nil)
	return state, version, last, err
}

// loadUntil is load for a command whose i-th event would have the id
// eventID(i) (nil: ids of no interest). When the stream already holds those
// events, applied is true and the fold stops after them: the state, version
// and position are those the command left.
func loadUntil[S any](ctx context.Context, d Deps, stream string, evolve func(S, events.Envelope) S, eventID func(int) uuid.UUID) (state S, version int64, last eventstore.Position, applied bool, err error) {
	recorded, err := d.Store.ReadStream(ctx, stream, eventstore.Forwards, 1, 0)
	if err != nil {
		return state, 0, last, false, err
	}
	if eventID != nil {
		first := eventID(0)
		for at, r := range recorded {
			if r.ID != first {
				continue
			}
			// One append's events are consecutive in their stream.
			end := at + 1
			for end < len(recorded) && recorded[end].ID == eventID(end-at) {
				end++
			}
			recorded, applied = recorded[:end], true
			break
		}
	}
	for _, r := range recorded {
		e, err := d.Registry.Decode(r.Type, r.SchemaVersion, r.Data)
		if err != nil {
			return state, 0, last, false, fmt.Errorf("load %s: %w", stream, err)
		}
		state = evolve(state, envelope(r, e))
		version, last = r.Version, r.Position
	}
	return state, version, last, applied, nil
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
	// Under an Idempotency-Key the event ids are the key's (see
	// WithIdempotency), else random.
	idem := idempotencyFrom(ctx)
	var eventID func(int) uuid.UUID
	if idem != nil {
		n := idem.nextRun(stream, true)
		eventID = func(i int) uuid.UUID { return idem.eventID(stream, n, i) }
	}
	for attempt := 1; ; attempt++ {
		var state S
		var version int64
		var last eventstore.Position
		var err error
		// A fresh stream is read too under a key: a retry may find there
		// what its dead attempt appended.
		if !fresh || attempt > 1 || eventID != nil {
			var applied bool
			state, version, last, applied, err = loadUntil(ctx, d, stream, evolve, eventID)
			if err != nil {
				return state, Result{}, err
			}
			if applied {
				// An attempt of this request that died after appending
				// recorded the command: its events are the outcome.
				return state, Result{Position: last, Appended: true}, nil
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
		actx, span := traceAppend(ctx, stream, len(decided))
		meta := metadataFrom(ctx)
		meta.TraceParent, meta.TraceState = traceContext(actx)
		data := make([]eventstore.EventData, len(decided))
		for i, e := range decided {
			raw, err := json.Marshal(e)
			if err != nil {
				endAppend(span, err)
				return state, Result{}, err
			}
			id := uuid.New()
			if eventID != nil {
				id = eventID(i)
			}
			data[i] = eventstore.EventData{
				ID: id, Type: e.EventType(), SchemaVersion: e.SchemaVersion(),
				Data: raw, Metadata: meta, RecordedAt: now,
			}
		}
		res, err := d.Store.Append(actx, stream, eventstore.Exact(version), data)
		endAppend(span, err)
		if idem != nil && !errors.Is(err, eventstore.ErrWrongExpectedVersion) && !errors.Is(err, eventstore.ErrAppendTooLarge) {
			// Written, or perhaps written (a time-out): the key must outlive
			// a failure of the request for a retry to find these events.
			idem.markAppended()
		}
		if errors.Is(err, eventstore.ErrWrongExpectedVersion) {
			retry := attempt < maxAttempts
			if d.Observer != nil {
				d.Observer.VersionConflict(retry)
			}
			if retry {
				continue
			}
			return state, Result{}, derrors.New(derrors.ErrConflict, "The resource was changed by another request; try again")
		}
		if err != nil {
			return state, Result{}, err
		}
		failpoint.Reach(failpoint.AppendCommitted)
		for _, e := range data {
			recorded(ctx, len(e.Data))
		}
		for i, e := range decided {
			state = evolve(state, events.Envelope{
				Meta: events.Meta{EventID: data[i].ID.String(), StreamID: stream, Version: version + int64(i) + 1,
					RecordedAt: now, UserID: meta.UserID, RequestID: meta.RequestID,
					CorrelationID: meta.CorrelationID, CausationID: meta.CausationID,
					TraceParent: meta.TraceParent, TraceState: meta.TraceState},
				Event: e,
			})
		}
		return state, Result{Position: res.Position, Appended: true}, nil
	}
}

// traceAppend starts the span of an append of n events to stream, as a
// child of ctx's span when that one is recorded (a traced request): the
// events then carry the append's trace context in their metadata, and the
// store's statements are its children. Otherwise it starts nothing (nil).
func traceAppend(ctx context.Context, stream string, n int) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, nil
	}
	return parent.TracerProvider().Tracer("lectern/commands").Start(ctx, "append "+eventstore.Category(stream),
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("lectern.stream", stream), attribute.Int("messaging.batch.message_count", n)))
}

// MaxTraceState is the longest tracestate an event's metadata records: the
// 512 bytes W3C Trace Context recommends propagating at least. The header
// comes from the caller, untrusted, and the log is permanent: a longer one
// is dropped (the traceparent is kept).
const MaxTraceState = 512

// traceContext is the W3C trace context ctx's span gives the events it
// appends, its tracestate dropped past MaxTraceState.
func traceContext(ctx context.Context) (traceparent, tracestate string) {
	traceparent, tracestate = tracing.Context(ctx)
	if len(tracestate) > MaxTraceState {
		tracestate = ""
	}
	return traceparent, tracestate
}

// endAppend ends an append's span (nil: none), with its error.
func endAppend(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// nextID allocates an id of a category from its PostgreSQL sequence; under
// an Idempotency-Key, the id the key drew there before, if it did.
func nextID(ctx context.Context, d Deps, sequence string) (int64, error) {
	id, err := d.IDs.Next(ctx, sequence)
	if err != nil {
		return 0, err
	}
	if idem := idempotencyFrom(ctx); idem != nil {
		drawn := [][]int64{{id}}
		if err := remember(ctx, d, idem, []string{sequence}, drawn); err != nil {
			return 0, err
		}
		id = drawn[0][0]
	}
	return id, nil
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

// abandonedClaimAge is how old a claim must be to be taken for abandoned
// when what it claims for was never recorded: far longer than a write may
// run (its bound is a minute), so that no command under way loses it.
const abandonedClaimAge = 10 * time.Minute

// abandonedClaim reports whether scope's claim on key, held by holder (a
// stream), was left by a command that stopped between its claim and its
// event (a crash, or a database gone, so that its release failed too): it
// is older than abandonedClaimAge, by the database's clock, which stamped
// it, and holder's stream holds no event. Without a way to tell, such a
// claim would hold its key for good.
func abandonedClaim(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, store eventstore.Store, scope, key, holder string) (bool, error) {
	var old bool
	err := q.QueryRow(ctx, `SELECT claimed_at < now() - make_interval(secs => $4) FROM unique_claims
		WHERE scope = $1 AND key = $2 AND owner = $3`, scope, key, holder, abandonedClaimAge.Seconds()).Scan(&old)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil // released, or taken, meanwhile
	case err != nil || !old:
		return false, err
	}
	recorded, err := store.ReadStream(ctx, holder, eventstore.Forwards, 1, 1)
	return err == nil && len(recorded) == 0, err
}

// claimOwner is who holds scope's claim on key: "" when nobody does.
func claimOwner(ctx context.Context, d Deps, scope, key string) (string, error) {
	var owner string
	err := d.DB.QueryRow(ctx, `SELECT owner FROM unique_claims WHERE scope = $1 AND key = $2`, scope, key).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return owner, err
}

// release gives up a claim a failed command made.
func release(ctx context.Context, d Deps, scope, key, owner string) {
	_, _ = d.DB.Exec(context.WithoutCancel(ctx), `DELETE FROM unique_claims WHERE scope = $1 AND key = $2 AND owner = $3`, scope, key, owner)
}

// wroteNothing reports whether a command's error means that it appended
// nothing: its decision refused it, its version was taken by others each
// time, or the events were too large. Anything else (a time-out, the store
// out of reach: ErrUnavailable) may have come after the commit, and what
// was reserved for the events (a seat, a job) must stay theirs.
func wroteNothing(err error) bool {
	var domain *derrors.Error
	var field *derrors.FieldError
	return (errors.As(err, &domain) || errors.As(err, &field)) && !errors.Is(err, derrors.ErrUnavailable) ||
		errors.Is(err, eventstore.ErrAppendTooLarge)
}
