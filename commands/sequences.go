package commands

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Sequences hands out ids from PostgreSQL sequences, one query for all the
// ids asked for at once: while a query is out, later callers wait and the
// next query serves them together. Under load a create then costs a fraction
// of a round trip for its id rather than one of its own; alone, it costs the
// one query it always did. Ids go out in the order they were asked for, and
// none is held back (a process that stops loses no more than a sequence
// always may: those of failed commands).
type Sequences struct {
	db *pgxpool.Pool

	mu     sync.Mutex
	queues map[string]*idQueue
}

type idQueue struct {
	waiting []chan idResult
	running bool // a query for this sequence is out
}

type idResult struct {
	id  int64
	err error
}

// idQueryTimeout bounds one query; each caller also stops at its own context.
const idQueryTimeout = 10 * time.Second

// NewSequences returns the id source of db.
func NewSequences(db *pgxpool.Pool) *Sequences {
	return &Sequences{db: db, queues: map[string]*idQueue{}}
}

// Next returns the next id of the named sequence.
func (s *Sequences) Next(ctx context.Context, sequence string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	ch := make(chan idResult, 1)
	s.mu.Lock()
	q := s.queues[sequence]
	if q == nil {
		q = &idQueue{}
		s.queues[sequence] = q
	}
	q.waiting = append(q.waiting, ch)
	lead := !q.running
	q.running = true
	s.mu.Unlock()
	if lead {
		s.serve(sequence, q)
	}
	select {
	case r := <-ch:
		return r.id, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// serve runs one query for everyone waiting on q, then hands the next
// batch to a goroutine of its own, so that the caller who led is not kept
// serving others.
func (s *Sequences) serve(sequence string, q *idQueue) {
	s.mu.Lock()
	batch := q.waiting
	q.waiting = nil
	if len(batch) == 0 {
		q.running = false
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	ids, err := s.take(sequence, len(batch))
	for i, ch := range batch {
		if err != nil {
			ch <- idResult{err: err}
		} else {
			ch <- idResult{id: ids[i]}
		}
	}
	s.mu.Lock()
	more := len(q.waiting) > 0
	if !more {
		q.running = false
	}
	s.mu.Unlock()
	if more {
		go s.serve(sequence, q)
	}
}

// take draws n ids from the sequence, in ascending order.
func (s *Sequences) take(sequence string, n int) ([]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), idQueryTimeout)
	defer cancel()
	var ids []int64
	var err error
	if n == 1 {
		ids = make([]int64, 1)
		err = s.db.QueryRow(ctx, "SELECT nextval($1::regclass)", sequence).Scan(&ids[0])
	} else {
		err = s.db.QueryRow(ctx, "SELECT array_agg(nextval($1::regclass)) FROM generate_series(1, $2::int)", sequence, n).Scan(&ids)
	}
	if err == nil && len(ids) != n {
		err = fmt.Errorf("%d ids for %d", len(ids), n)
	}
	if err != nil {
		return nil, fmt.Errorf("sequence %s: %w", sequence, err)
	}
	slices.Sort(ids)
	return ids, nil
}
