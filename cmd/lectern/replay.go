package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"lectern/pgtext"
	"lectern/service"
)

// replayCmd is `lectern replay`: rebuild read models from the event log
// while the service keeps serving (DESIGN §9).
func replayCmd() *cobra.Command {
	var list bool
	cmd := &cobra.Command{
		Use:   "replay [read model...]",
		Short: "Rebuild every read model (or the named ones) from the event log and swap them in",
		Long: "Rebuild read models from the event log into fresh tables, then swap them in atomically once\n" +
			"they have caught up. A running service keeps serving the old tables meanwhile, and goes on\n" +
			"projecting onto the new ones after the swap. Read models are named by their projection:\n" +
			"see --list. Progress is a bar on a terminal, a line every few seconds otherwise.",
		RunE: func(cmd *cobra.Command, names []string) error {
			ps, err := service.ReplayableProjections(names...)
			if err != nil {
				return err
			}
			if list {
				for _, p := range ps {
					fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", p.Name, strings.Join(p.Tables, ", "))
				}
				return nil
			}
			e, err := readEnv(false)
			if err != nil {
				return err
			}
			// Without the key the read models would be rebuilt from the
			// sealed fields' placeholders: every user "erased".
			dataKey, previous, err := e.readDataKeys()
			if err == nil && dataKey == nil {
				err = errors.New("set LECTERN_DATA_KEY or LECTERN_DATA_KEY_FILE: the replay opens personal fields with it (without it the read models would hold the placeholders of erased data)")
			}
			if err != nil {
				return err
			}
			pool, err := connectEnv(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			r, closeStore, err := service.NewReplayer(cmd.Context(), service.Config{Pool: pool, EventStoreURL: os.Getenv("EVENTSTORE_URL"),
				DataKey: dataKey, PreviousDataKey: previous})
			if err != nil {
				return err
			}
			defer closeStore()
			var total int64 = -1 // unknown: EventStoreDB does not count $all
			if r.Total != nil {
				if total, err = r.Total(cmd.Context()); err != nil {
					return err
				}
			}
			progress := newProgress(cmd.ErrOrStderr(), total, "replay")
			r.Progress = progress.update
			start := time.Now()
			results, err := r.Replay(cmd.Context(), ps...)
			progress.done()
			if err != nil {
				return pgtext.Valueless(err) // a job's log may keep it: not the values it quotes
			}
			read := progress.read()
			elapsed := time.Since(start)
			for _, res := range results {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %d events applied, live from %s (%s)\n",
					res.Projection, res.Applied, res.Position, strings.Join(res.Tables, ", "))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "replayed %d events in %s (%.0f events/s)\n",
				read, elapsed.Round(time.Millisecond), float64(read)/elapsed.Seconds())
			return nil
		},
	}
	cmd.Flags().BoolVar(&list, "list", false, "list the read models and their tables, and do nothing")
	return cmd
}

// progress shows a replay's or an export's progress: a bar with events/s
// and the time left on a terminal, plain lines every few seconds otherwise
// (logs, CI).
type progress struct {
	mu        sync.Mutex
	bar       *progressbar.ProgressBar
	w         io.Writer
	operation string
	total     int64
	n         int64
	start     time.Time
	last      time.Time
}

const progressEvery = 5 * time.Second

// newProgress reports the progress of an operation (replay, export) over
// total events (-1: unknown) to w: a bar on a terminal, else a line every
// progressEvery.
func newProgress(w io.Writer, total int64, operation string) *progress {
	p := &progress{w: w, total: total, start: time.Now(), last: time.Now(), operation: operation}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(operation),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("events"),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionFullWidth(),
			progressbar.OptionClearOnFinish(),
		)
	}
	return p
}

func (p *progress) update(read int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n = read
	if p.bar != nil {
		_ = p.bar.Set64(read)
		return
	}
	if now := time.Now(); now.Sub(p.last) >= progressEvery {
		p.last = now
		_, _ = fmt.Fprintln(p.w, p.line(now))
	}
}

// line is "replay: 120000/1000000 events (12%), 95000 events/s, 9s left".

func (p *progress) line(now time.Time) string {
	elapsed := now.Sub(p.start).Seconds()
	rate := float64(p.n) / elapsed
	if p.total < 0 {
		return fmt.Sprintf("%s: %d events, %.0f events/s", p.operation, p.n, rate)
	}
	pct, left := 100.0, time.Duration(0)
	if p.total > 0 {
		pct = 100 * float64(p.n) / float64(p.total)
	}
	if rate > 0 && p.total > p.n {
		left = time.Duration(float64(p.total-p.n) / rate * float64(time.Second))
	}
	return fmt.Sprintf("%s: %d/%d events (%.0f%%), %.0f events/s, %s left", p.operation, p.n, p.total, pct, rate, left.Round(time.Second))
}

func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}

func (p *progress) read() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}
