package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"lectern/eventstore"
	"lectern/eventstore/esdb"
	"lectern/eventstore/postgres"
	"lectern/history"
	"lectern/personal"
	"lectern/projections"
	"lectern/service"
)

// eventsCmd is `lectern events`: the event log for analysts (DESIGN §9).
func eventsCmd() *cobra.Command {
	events := &cobra.Command{Use: "events", Short: "Read the event log"}
	var f history.Filter
	var since, until, after, output, format string
	export := &cobra.Command{
		Use:   "export",
		Short: "Write the event log as NDJSON (one event per line), password hashes redacted",
		Long: "Write the event log as NDJSON, in log order, one event per line: position, stream, version, type,\n" +
			"schema_version, data, metadata, recorded_at, event_id. The export is the log as of its start;\n" +
			"it reads and writes a page at a time, so memory stays constant however long the log. It reads\n" +
			"the event store Lectern runs on: EventStoreDB when EVENTSTORE_URL is set, else PostgreSQL.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			if f.Since, err = parseTimeFlag("--since", since); err != nil {
				return err
			}
			if f.Until, err = parseTimeFlag("--until", until); err != nil {
				return err
			}
			if after != "" {
				if f.After, err = eventstore.ParsePosition(after); err != nil {
					return fmt.Errorf("--after %q: want a position such as 1234-56 (an exported line's)", after)
				}
			}
			if err := f.Validate(); err != nil {
				return err
			}
			// Every flag is checked before the output is opened: a
			// refused export leaves an existing file as it was.
			exportTo := history.Export
			switch format {
			case "lines":
			case "cloudevents":
				exportTo = history.ExportCloudEvents
			default:
				return fmt.Errorf("--format %q: want lines or cloudevents", format)
			}
			store, closeStore, err := openOpenedEventStore(cmd.Context())
			if err != nil {
				return err
			}
			defer closeStore()
			var w io.Writer = cmd.OutOrStdout()
			if output != "" && output != "-" {
				file, err := os.Create(output)
				if err != nil {
					return err
				}
				defer func() {
					if cerr := file.Close(); err == nil {
						err = cerr
					}
				}()
				w = file
			}
			// Lines written, counted for the progress report on stderr.
			progress := newProgress(cmd.ErrOrStderr(), -1, "export")
			written := &lineCounter{w: w, lines: progress.update}
			n, err := exportTo(cmd.Context(), store, written, f)
			progress.done()
			if err != nil {
				// The lines that reached the output, not those the export
				// had buffered: an incremental export goes on after the
				// output's last line.
				return fmt.Errorf("export stopped after %d events written: %w", written.n, err)
			}
			_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "exported %d events\n", n)
			return nil
		},
	}
	fl := export.Flags()
	fl.StringVar(&f.Category, "category", "", "only streams of this category (user, agent, class, ...)")
	fl.StringVar(&f.Type, "type", "", "only events of this type (user.signed_up, ...)")
	fl.StringVar(&f.Stream, "stream", "", "only this stream (user-7, ...)")
	fl.StringVar(&since, "since", "", "only events recorded at or after this time (RFC 3339)")
	fl.StringVar(&until, "until", "", "only events recorded before this time (RFC 3339)")
	fl.StringVar(&after, "after", "", "only events after this position (the last exported line's): an incremental export")
	fl.StringVarP(&output, "output", "o", "", "write to this file instead of standard output")
	fl.StringVar(&format, "format", "lines", "lines (Lectern's NDJSON), or cloudevents (one CloudEvent 1.0, structured JSON, a line)")
	events.AddCommand(export, copyCmd(), sealCmd())
	return events
}

// openOpenedEventStore is openEventStore reading events with their personal
// fields opened with the data key (placeholders for erased subjects); with
// no data key configured, as stored (sealed).
func openOpenedEventStore(ctx context.Context) (eventstore.Store, func(), error) {
	store, closeStore, err := openEventStore(ctx)
	if err != nil {
		return nil, nil, err
	}
	sealer, keys, pool, err := openSealer(ctx, "the export opens personal fields with it", env.readDataKeys)
	if err != nil {
		closeStore()
		return nil, nil, err
	}
	stopListening := listenForErasures(ctx, pool, keys)
	return personal.NewStore(store, sealer), func() { stopListening(); closeStore(); pool.Close() }, nil
}

// erasureListenWait bounds how long an export waits for its erasure
// listener before it reads without it (keys then expire after
// personal.CacheTTL, as before).
const erasureListenWait = 5 * time.Second

// listenForErasures makes keys forget a subject's key as soon as another
// process's erasure of it commits (personal.ErasuresChannel), as the
// server's replicas do, until stop is called: an export that runs while a
// user is erased writes the user's later events with their placeholders,
// rather than opening them for up to personal.CacheTTL more. It returns
// once listening (or after erasureListenWait, with a warning on standard
// error): what keys cached before is forgotten then.
func listenForErasures(ctx context.Context, pool *pgxpool.Pool, keys *personal.Keys) (stop func()) {
	log := logger(slog.LevelWarn)
	l := projections.NewListener(pool, log)
	keys.FollowErasures(l)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx)
	}()
	select {
	case <-l.Listening():
	case <-time.After(erasureListenWait):
		log.Warn("not listening for erasures: keys of users erased during the export expire after the cache's lifetime",
			"cache", personal.CacheTTL)
	}
	return func() {
		cancel()
		<-done
	}
}

// openSealer connects to DATABASE_URL and returns a sealer under the master
// key of personal data (and the previous one, during a rotation) from the
// environment, and the pool to close: an error, saying why the key is
// needed, when none is set.
func openSealer(ctx context.Context, why string, dataKeys func(env) ([]byte, []byte, error)) (*personal.Sealer, *personal.Keys, *pgxpool.Pool, error) {
	e, err := readEnv(false)
	var key, previous []byte
	if err == nil {
		key, previous, err = dataKeys(e)
	}
	if err == nil && key == nil {
		err = errors.New("set LECTERN_DATA_KEY or LECTERN_DATA_KEY_FILE: " + why)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	pool, err := connectEnv(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	keys, err := personal.NewRotatingKeys(pool, key, previous)
	if err == nil {
		err = keys.Verify(ctx)
	}
	if err != nil {
		pool.Close()
		return nil, nil, nil, err
	}
	return personal.NewSealer(keys), keys, pool, nil
}

// openEventStore opens the event store the service runs on: EventStoreDB
// when EVENTSTORE_URL is set, else the PostgreSQL store of DATABASE_URL.
func openEventStore(ctx context.Context) (eventstore.Store, func(), error) {
	to := os.Getenv("EVENTSTORE_URL")
	useESDB, err := service.UsesEventStoreDB(to)
	if err != nil {
		return nil, nil, err
	}
	if useESDB {
		s, err := esdb.Open(ctx, to)
		if err != nil {
			return nil, nil, fmt.Errorf("EVENTSTORE_URL: %w", err)
		}
		return s, func() { _ = s.Close() }, nil
	}
	pool, err := connectEnv(ctx)
	if err != nil {
		return nil, nil, err
	}
	s := postgres.New(pool, nil)
	return s, func() { s.Close(); pool.Close() }, nil
}

// copyCmd is `lectern events copy`: the PostgreSQL event log into EventStoreDB.
func copyCmd() *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "copy --to esdb://host:2113?tls=false",
		Short: "Copy the PostgreSQL event log into EventStoreDB, order and ids preserved",
		Long: "Copy every event of the PostgreSQL event log (DATABASE_URL) into EventStoreDB, in log order,\n" +
			"each to its own stream at its own version, with its id, type, data, metadata, schema version and\n" +
			"recorded time. Re-running it is safe: events already copied are accepted as retries and written\n" +
			"once. Stop Lectern first (or copy again once it is stopped) so no event is appended meanwhile.\n" +
			"Each projection's position is recorded as its EventStoreDB checkpoint (unless it has one), so a\n" +
			"service started on EventStoreDB goes on from where the read models stand.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				to = os.Getenv("EVENTSTORE_URL")
			}
			if !strings.HasPrefix(to, "esdb://") && !strings.HasPrefix(to, "esdb+discover://") {
				return fmt.Errorf("--to: want an EventStoreDB connection string such as esdb://localhost:2113?tls=false, got %q", to) // its password masked by redact
			}
			ctx := cmd.Context()
			pool, err := connectEnv(ctx)
			if err != nil {
				return err
			}
			defer pool.Close()
			from := postgres.New(pool, nil)
			defer from.Close()
			dst, err := esdb.Open(ctx, to)
			if err != nil {
				return err
			}
			defer func() { _ = dst.Close() }()
			stderr := cmd.ErrOrStderr()
			seen, lastReport := 0, time.Now()
			n, err := history.Copy(ctx, from, dst, func(n int) {
				seen = n
				if time.Since(lastReport) >= 5*time.Second {
					lastReport = time.Now()
					_, _ = fmt.Fprintf(stderr, "%d events read\n", n)
				}
			})
			if err != nil {
				return fmt.Errorf("copy stopped after %d events read (%d written): %w", seen, n, err)
			}
			fmt.Fprintf(stderr, "copied %d events (%d read, %d already in EventStoreDB)\n", n, seen, seen-n)
			// The read models in PostgreSQL stay: the projections go on from
			// where they stand instead of applying the history again.
			c, err := history.CopyCheckpoints(ctx, pool, dst)
			if err != nil {
				return fmt.Errorf("projection checkpoints: %w", err)
			}
			fmt.Fprintf(stderr, "recorded %d projection checkpoints\n", c)
			return nil
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "EventStoreDB connection string (default: EVENTSTORE_URL)")
	return cmd
}

// sealCmd is `lectern events seal`: the personal fields of a PostgreSQL
// log's events appended before sealing, sealed in place.
func sealCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "seal",
		Short: "Seal the personal fields of events appended before Lectern sealed them (PostgreSQL log)",
		Long: "Seal, in place, the personal fields of the events of the PostgreSQL log (DATABASE_URL) that were\n" +
			"appended in clear, before Lectern sealed them, as appending them now would (docs/privacy.md). The\n" +
			"values of a user erased since are sealed under a key that is forgotten at once, so that they read\n" +
			"as placeholders like the user's other events. An event sealed before one of its fields was sealed\n" +
			"is sealed whole again. Events keep their ids and positions; events with nothing personal in clear\n" +
			"are left alone, so a second run changes nothing. Lectern may run meanwhile. EventStoreDB's events\n" +
			"cannot be rewritten: seal the PostgreSQL log before `lectern events copy`.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if useESDB, err := service.UsesEventStoreDB(os.Getenv("EVENTSTORE_URL")); err != nil || useESDB {
				if err == nil {
					err = errors.New("EVENTSTORE_URL is set: EventStoreDB's events cannot be rewritten; seal the PostgreSQL log (unset EVENTSTORE_URL) before copying it")
				}
				return err
			}
			ctx := cmd.Context()
			sealer, _, pool, err := openSealer(ctx, "sealing needs it", env.readDataKeys)
			if err != nil {
				return err
			}
			defer pool.Close()
			store := postgres.New(pool, nil)
			defer store.Close()
			read, sealed, err := store.Rewrite(ctx, func(ev eventstore.RecordedEvent) (json.RawMessage, bool, error) {
				return sealer.SealStored(ctx, ev.Type, ev.Data, ev.Metadata.UserID)
			})
			if err != nil {
				return fmt.Errorf("sealing stopped after %d events read (%d sealed): %w", read, sealed, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sealed %d of %d events\n", sealed, read)
			return nil
		},
	}
}

func parseTimeFlag(name, value string) (time.Time, error) {
	if value == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, value)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: want an RFC 3339 time such as 2026-11-21T10:00:00Z: %w", name, err)
	}
	return t, nil
}

// lineCounter passes writes through and reports the lines written so far.
type lineCounter struct {
	w     io.Writer
	n     int64
	lines func(int64)
}

func (c *lineCounter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if k := int64(bytes.Count(p[:n], []byte{'\n'})); k > 0 {
		c.n += k
		c.lines(c.n)
	}
	return n, err
}
