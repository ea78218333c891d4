package commands

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"lectern/pgtest"
)

// A worker puts back, or drops, a job whose request is not recorded only as
// it claimed it: a job whose lease it outlived is another worker's now.
func TestUnrequestedActsOnlyUnderItsOwnLease(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Fresh(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	k := &KnowledgeJobs{d: Deps{DB: pool, Now: func() time.Time { return now }}, logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	mine, theirs := now.Add(time.Minute), now.Add(2*time.Minute)
	job := func(id int64, requested time.Time, lease time.Time) {
		t.Helper()
		if _, err := pool.Exec(ctx, `INSERT INTO knowledge_reindex_jobs (job_id, knowledge_id, user_id, status, requested_at, started_at, lease_until)
			VALUES ($1, 1, 1, 'running', $2, $2, $3)`, id, requested, lease); err != nil {
			t.Fatal(err)
		}
	}
	state := func(id int64) (string, *time.Time, bool) {
		t.Helper()
		var status string
		var lease *time.Time
		err := pool.QueryRow(ctx, `SELECT status, lease_until FROM knowledge_reindex_jobs WHERE job_id = $1`, id).Scan(&status, &lease)
		if err != nil {
			return "", nil, false
		}
		return status, lease, true
	}

	job(1, now, theirs) // re-claimed by another worker since
	job(2, now.Add(-time.Hour), theirs)
	for _, id := range []int64{1, 2} {
		if err := k.unrequested(ctx, id, mine); !errors.Is(err, errNotRequested) {
			t.Fatalf("job %d: %v", id, err)
		}
		if status, lease, ok := state(id); !ok || status != "running" || !lease.Equal(theirs) {
			t.Errorf("job %d, another worker's, became %v %v (there: %v)", id, status, lease, ok)
		}
	}

	job(3, now, mine)
	job(4, now.Add(-time.Hour), mine)
	_ = k.unrequested(ctx, 3, mine)
	if status, lease, ok := state(3); !ok || status != "queued" || !lease.After(now) {
		t.Errorf("job 3, waiting for its request, is %v %v (there: %v), want queued and left alone a moment", status, lease, ok)
	}
	_ = k.unrequested(ctx, 4, mine)
	if _, _, ok := state(4); ok {
		t.Error("job 4, whose request never came, was not dropped")
	}
}
