package main

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"lectern/eventstore"
	"lectern/eventstore/esdb"
	"lectern/eventstore/esdbfake"
	"lectern/eventstore/postgres"
	"lectern/pgtest"
)

// esdbBench compares appends to the in-process fake EventStoreDB (over gRPC
// on a loopback port, through the esdb adapter) with appends to the
// PostgreSQL store, in the same run. The fake keeps events in memory and
// fsyncs nothing, so its figure bounds the adapter and client overhead; it
// says nothing of a real EventStoreDB node's throughput.
func esdbBench(ctx context.Context, base string) error {
	pool, _, err := pgtest.NewDatabase(ctx, base)
	if err != nil {
		return err
	}
	defer pool.Close()
	pg := postgres.New(pool, nil)
	defer pg.Close()

	srv, err := esdbfake.New()
	if err != nil {
		return err
	}
	defer srv.Close()
	es, err := esdb.Open(ctx, srv.URL())
	if err != nil {
		return err
	}
	defer func() { _ = es.Close() }()

	fmt.Println("\n## Append throughput (distinct streams): esdb adapter on esdbfake vs PostgreSQL store")
	fmt.Printf("%-8s %14s %14s %8s\n", "writers", "esdbfake/s", "postgres/s", "ratio")
	for _, writers := range []int{1, 8} {
		fake, err := storeAppends(ctx, es, "esdb", writers)
		if err != nil {
			return fmt.Errorf("esdbfake appends: %w", err)
		}
		pgRate, err := storeAppends(ctx, pg, "pg", writers)
		if err != nil {
			return fmt.Errorf("postgres appends: %w", err)
		}
		fmt.Printf("%-8d %14.0f %14.0f %8.2f\n", writers, fake, pgRate, fake/pgRate)
	}

	// Projection lag: a server on each store, each with a database of its own.
	fmt.Println("\n## Projection lag (append -> row visible): server on esdbfake vs on PostgreSQL")
	fmt.Printf("%-22s %10s %10s %12s %12s\n", "", "p50", "p99", "append p50", "append p99")
	for _, on := range []string{"esdbfake", "postgres"} {
		lagPool, lagDB, err := pgtest.NewDatabase(ctx, base)
		if err != nil {
			return err
		}
		var env []string
		var store eventstore.Store = postgres.New(lagPool, nil)
		if on == "esdbfake" {
			lagSrv, err := esdbfake.New()
			if err != nil {
				lagPool.Close()
				return err
			}
			defer lagSrv.Close()
			lagES, err := esdb.Open(ctx, lagSrv.URL())
			if err != nil {
				lagPool.Close()
				return err
			}
			defer func() { _ = lagES.Close() }()
			env, store = []string{"EVENTSTORE_URL=" + lagSrv.URL()}, lagES
		}
		srv, err := startServer(ctx, base, lagDB, env...)
		if err != nil {
			lagPool.Close()
			return err
		}
		lags, appends, err := measureLag(ctx, lagPool, store)
		srv.stop()
		lagPool.Close()
		if err != nil {
			return fmt.Errorf("lag on %s: %w", on, err)
		}
		fmt.Printf("%-22s %10s %10s %12s %12s\n", "on "+on, ms(percentile(lags, .5)), ms(percentile(lags, .99)),
			ms(percentile(appends, .5)), ms(percentile(appends, .99)))
	}
	return nil
}

// storeAppends appends single events to one stream per writer, each at its
// exact expected version, and returns appends per second.
func storeAppends(ctx context.Context, store eventstore.Store, name string, writers int) (float64, error) {
	tag := fmt.Sprintf("bench%s%d%s", name, writers, runID)
	return measure(writers, func(w, i int) error {
		_, err := store.Append(ctx, fmt.Sprintf("%s-%d", tag, w), eventstore.Exact(int64(i)), []eventstore.EventData{{
			ID: uuid.New(), Type: "bench.appended", SchemaVersion: 1, Data: payload(),
			Metadata: eventstore.Metadata{UserID: 1, RequestID: "bench"},
		}})
		return err
	})
}
