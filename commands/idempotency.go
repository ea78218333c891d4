package commands

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"lectern/eventstore"
)

// idempotencyNamespace is the UUIDv5 namespace of the event ids derived from
// Idempotency-Keys. It never changes: a retry must derive the ids its dead
// attempt derived.
var idempotencyNamespace = uuid.MustParse("cdf45977-60b1-4cd0-8d2d-e5d3d26d8bed")

// idempotency is a request's Idempotency-Key as its commands see it.
type idempotency struct {
	userID int64
	key    string
	// since is when the key was taken: the same key used again once it was
	// forgotten (after 24 hours, or a failure that wrote nothing) is another
	// request, whose events must not be taken for the first one's.
	since time.Time

	mu       sync.Mutex
	runs     map[string]int // commands run so far, per stream
	drawn    map[string]int // ids drawn so far, per sequence
	appended bool
}

type idempotencyCtxKey struct{}

// WithIdempotency runs the commands under ctx as a request with userID's
// Idempotency-Key key, taken at since (the key's created_at). Their event ids
// are derived from the key, and their new ids are the ones the key drew
// before: a retry of a request whose process died after it appended finds
// the events it appended, and answers with them, rather than appending again.
// This relies on a request running its commands in the same order on each
// attempt, as a handler does, and on the key's row in idempotency_keys
// (api.idempotently's), which the ids it draws belong to.
func WithIdempotency(ctx context.Context, userID int64, key string, since time.Time) context.Context {
	return context.WithValue(ctx, idempotencyCtxKey{}, &idempotency{userID: userID, key: key, since: since,
		runs: map[string]int{}, drawn: map[string]int{}})
}

// MayHaveAppended reports whether a command run under ctx's Idempotency-Key
// appended, or failed without knowing whether its append was written: the
// key must then be kept for a retry to find what was written.
func MayHaveAppended(ctx context.Context) bool {
	i := idempotencyFrom(ctx)
	if i == nil {
		return false
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.appended
}

func idempotencyFrom(ctx context.Context) *idempotency {
	i, _ := ctx.Value(idempotencyCtxKey{}).(*idempotency)
	return i
}

// nextRun returns the index of the request's next command on stream and,
// when take, counts that command.
func (i *idempotency) nextRun(stream string, take bool) int {
	i.mu.Lock()
	defer i.mu.Unlock()
	n := i.runs[stream]
	if take {
		i.runs[stream]++
	}
	return n
}

// eventID is the id of the n-th event the run-th command on stream appends.
func (i *idempotency) eventID(stream string, run, n int) uuid.UUID {
	name := fmt.Sprintf("%d %q %d %q %d %d", i.userID, i.key, i.since.UnixMicro(), stream, run, n)
	return uuid.NewSHA1(idempotencyNamespace, []byte(name))
}

func (i *idempotency) markAppended() {
	i.mu.Lock()
	i.appended = true
	i.mu.Unlock()
}

// draw counts n ids of sequence and returns the index of the first.
func (i *idempotency) draw(sequence string, n int) int {
	i.mu.Lock()
	defer i.mu.Unlock()
	base := i.drawn[sequence]
	i.drawn[sequence] += n
	return base
}

// remember replaces ids just drawn (drawn[k] from sequences[k], in the order
// drawn) with those an earlier attempt of the request drew in their place,
// and records them where there were none. A retry thus targets the streams
// its dead attempt created; the ids it drew itself are skipped, as a
// sequence skips those of a failed command.
func remember(ctx context.Context, d Deps, idem *idempotency, sequences []string, drawn [][]int64) error {
	var names []string
	var indexes []int32
	var ids []int64
	for k, seq := range sequences {
		base := idem.draw(seq, len(drawn[k]))
		for j, id := range drawn[k] {
			names = append(names, seq)
			indexes = append(indexes, int32(base+j))
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	// DO UPDATE rather than DO NOTHING, so that RETURNING has the row a
	// previous attempt wrote. The key's row exists: the foreign key takes
	// these rows with it when the key goes.
	rows, err := d.DB.Query(ctx, `INSERT INTO idempotency_ids (user_id, key, sequence, seq_index, id)
		SELECT $1, $2, s, i, v FROM unnest($3::text[], $4::int[], $5::bigint[]) AS t(s, i, v)
		ON CONFLICT (user_id, key, sequence, seq_index) DO UPDATE SET id = idempotency_ids.id
		RETURNING sequence, seq_index, id`, idem.userID, idem.key, names, indexes, ids)
	if err != nil {
		return fmt.Errorf("idempotency ids: %w", err)
	}
	defer rows.Close()
	type slot struct {
		seq   string
		index int32
	}
	kept := map[slot]int64{}
	for rows.Next() {
		var s slot
		var id int64
		if err := rows.Scan(&s.seq, &s.index, &id); err != nil {
			return err
		}
		kept[s] = id
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("idempotency ids: %w", err)
	}
	at := 0
	for k := range sequences {
		for j := range drawn[k] {
			id, ok := kept[slot{names[at], indexes[at]}]
			if !ok {
				return fmt.Errorf("idempotency ids: no id for %s #%d", names[at], indexes[at])
			}
			drawn[k][j] = id
			at++
		}
	}
	return nil
}

// rememberSessionIDs is remember for the ids a practice turn drew.
func rememberSessionIDs(ctx context.Context, d Deps, newSession bool, ids *sessionIDs) error {
	idem := idempotencyFrom(ctx)
	if idem == nil {
		return nil
	}
	sequences := []string{"session_model_ids", "session_response_ids", "session_few_shot_link_ids"}
	drawn := [][]int64{ids.models, ids.responses, ids.links}
	if newSession {
		sequences = append(sequences, "session_ids", "session_setting_ids")
		drawn = append(drawn, []int64{ids.session}, []int64{ids.setting})
	}
	if err := remember(ctx, d, idem, sequences, drawn); err != nil {
		return err
	}
	if newSession {
		ids.session, ids.setting = drawn[3][0], drawn[4][0]
	}
	return nil
}

// nextEventIDs are the ids the request's next command on stream will give
// its events under ctx's Idempotency-Key (nil without one), for loadUntil.
func nextEventIDs(ctx context.Context, stream string) func(int) uuid.UUID {
	idem := idempotencyFrom(ctx)
	if idem == nil {
		return nil
	}
	n := idem.nextRun(stream, false)
	return func(i int) uuid.UUID { return idem.eventID(stream, n, i) }
}

// appliedBefore reports whether the request's next command on stream will
// find its events already appended, by an attempt of the request that died
// after appending them. A check made before that command, which those very
// events now fail (an invite code they used up), is then no reason to refuse.
func appliedBefore(ctx context.Context, d Deps, stream string) (bool, error) {
	ids := nextEventIDs(ctx, stream)
	if ids == nil {
		return false, nil
	}
	first := ids(0)
	recorded, err := d.Store.ReadStream(ctx, stream, eventstore.Forwards, 1, 0)
	if err != nil {
		return false, err
	}
	for _, r := range recorded {
		if r.ID == first {
			return true, nil
		}
	}
	return false, nil
}
