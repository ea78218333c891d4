package service

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"lectern/eventstore"
	"lectern/personal"
	"lectern/projections"
)

// NewReplayer returns a replayer of the read models over the event store cfg
// selects, and the function that closes what it opened.
func NewReplayer(ctx context.Context, cfg Config) (*projections.Replayer, func(), error) {
	keys, sealer, err := newSealer(cfg)
	if err == nil && keys != nil {
		err = keys.Verify(ctx)
	}
	if err != nil {
		return nil, nil, err
	}
	r := &projections.Replayer{Pool: cfg.Pool, Registry: registryFor(sealer)}
	es, pg, err := openStore(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	// Each page's keys come in one statement; the registry opens the
	// events where the replay decodes them, pages side by side.
	opened := func(s eventstore.Store) eventstore.Store {
		if sealer == nil {
			return s
		}
		return personal.NewPrefetching(s, sealer)
	}
	if es != nil {
		r.Store, r.Checkpoints = opened(es), projections.ESDBCheckpoints{}
		return r, func() { _ = es.Close() }, nil
	}
	r.Store, r.Checkpoints = opened(pg), projections.PostgresCheckpoints{}
	r.Total = func(ctx context.Context) (int64, error) {
		var n int64
		err := cfg.Pool.QueryRow(ctx, `SELECT count(*) FROM events`).Scan(&n)
		return n, err
	}
	return r, pg.Close, nil
}

// ReplayableProjections returns the projections a replay can rebuild, or of
// them the named ones (an unknown name is an error that lists the known).
func ReplayableProjections(names ...string) ([]projections.Projection, error) {
	var all []projections.Projection
	var known []string
	for _, p := range Projections() {
		if projections.Replayable(p) {
			all = append(all, p)
			known = append(known, p.Name)
		}
	}
	if len(names) == 0 {
		return all, nil
	}
	var out []projections.Projection
	for _, n := range names {
		i := slices.IndexFunc(all, func(p projections.Projection) bool { return p.Name == n })
		if i < 0 {
			return nil, fmt.Errorf("no read model %q (there are: %s)", n, strings.Join(known, ", "))
		}
		if !slices.ContainsFunc(out, func(p projections.Projection) bool { return p.Name == n }) {
			out = append(out, all[i])
		}
	}
	return out, nil
}
