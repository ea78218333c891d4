package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"lectern/personal"
)

// keysCmd administers the master key of personal data (docs/privacy.md).
func keysCmd() *cobra.Command {
	keys := &cobra.Command{Use: "keys", Short: "Manage the master key of personal data"}
	keys.AddCommand(&cobra.Command{
		Use:   "rotate",
		Short: "Wrap under LECTERN_DATA_KEY every subject key that LECTERN_DATA_KEY_PREVIOUS wrapped",
		Long: `Wraps under the master key LECTERN_DATA_KEY (or LECTERN_DATA_KEY_FILE) every subject key
that the previous master key, LECTERN_DATA_KEY_PREVIOUS (or LECTERN_DATA_KEY_PREVIOUS_FILE),
wrapped. Run it once every replica runs with both keys; then drop the previous key.
It may run while the replicas serve, and again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := readEnv(false)
			if err != nil {
				return err
			}
			key, err := e.dataKey()
			if err != nil {
				return fmt.Errorf("data key: %w", err)
			}
			previous, err := e.previousDataKey()
			switch {
			case err != nil:
				return err
			case key == nil:
				return errors.New("set LECTERN_DATA_KEY or LECTERN_DATA_KEY_FILE: the master key to wrap under")
			case previous == nil:
				return errors.New("set LECTERN_DATA_KEY_PREVIOUS or LECTERN_DATA_KEY_PREVIOUS_FILE: the master key to rotate away from")
			case bytes.Equal(key, previous):
				return errors.New("LECTERN_DATA_KEY_PREVIOUS is LECTERN_DATA_KEY: nothing to rotate")
			}
			pool, err := connectEnv(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			keys, err := personal.NewRotatingKeys(pool, key, previous)
			if err != nil {
				return err
			}
			rep, err := keys.Rewrap(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "rewrapped %d subject keys under LECTERN_DATA_KEY; %d were under it already; %d subjects are erased\n",
				rep.Rewrapped, rep.Current, rep.Erased)
			if rep.UnreadableCount > 0 {
				return fmt.Errorf("%d subject keys open under neither master key and were left as they are: %s",
					rep.UnreadableCount, strings.Join(rep.Unreadable, ", "))
			}
			if rep.Changed > 0 {
				fmt.Fprintf(out, "%d subject keys changed while being rewrapped (erased, or rewrapped by another run): run it again to check them\n", rep.Changed)
				return nil
			}
			fmt.Fprintln(out, "no subject key is left under the previous master key: restart the replicas without LECTERN_DATA_KEY_PREVIOUS")
			return nil
		},
	})
	return keys
}
