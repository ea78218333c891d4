package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/spf13/cobra"

	"lectern/auth"
	"lectern/personal"
)

// keysCmd administers the master key of personal data (docs/privacy.md).
func keysCmd() *cobra.Command {
	keys := &cobra.Command{Use: "keys", Short: "Manage the master key of personal data"}
	keys.AddCommand(keysNewCmd(), keysRotateCmd())
	return keys
}

// keysNewCmd makes a master key file: the key a rotation goes to.
func keysNewCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "new FILE",
		Short: "Write a new master key to FILE (64 hex characters, mode 0600), which must not exist",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			key, err := auth.CreateKey(path)
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("%s exists: a new key goes to a new file", path)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "a new master key in %s, key id %s\n", path, personal.KeyID(key))
			return nil
		},
	}
}

func keysRotateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rotate",
		Short: "Wrap under LECTERN_DATA_KEY every subject key that LECTERN_DATA_KEY_PREVIOUS wrapped",
		Long: `Wraps under the master key LECTERN_DATA_KEY (or LECTERN_DATA_KEY_FILE, which must exist) every
subject key that the previous master key, LECTERN_DATA_KEY_PREVIOUS (or
LECTERN_DATA_KEY_PREVIOUS_FILE), wrapped, then passes over the keys again until a whole pass
finds none left under the previous key. Run it once every replica runs with both keys; then
drop the previous key (docs/privacy.md). It may run while the replicas serve, and again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := readEnv(false)
			if err != nil {
				return err
			}
			key, previous, err := e.dataKeys()
			switch {
			case err != nil:
				return err
			case previous == nil:
				return errors.New("set LECTERN_DATA_KEY_PREVIOUS or LECTERN_DATA_KEY_PREVIOUS_FILE: the master key to rotate away from")
			case bytes.Equal(key, previous):
				return errors.New("LECTERN_DATA_KEY_PREVIOUS is LECTERN_DATA_KEY: nothing to rotate")
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "from the previous master key %s to %s (the replicas log the ids of theirs at start)\n",
				personal.KeyID(previous), personal.KeyID(key))
			pool, err := connectEnv(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			keys, err := personal.NewRotatingKeys(pool, key, previous)
			if err != nil {
				return err
			}
			rewrapped, last, err := keys.RewrapAll(cmd.Context(), func(pass int, rep personal.RewrapReport) {
				reportPass(out, pass, rep)
			})
			switch {
			case err != nil:
				return err
			case last.UnreadableCount > 0:
				return fmt.Errorf("%d subject keys open under neither master key and were left as they are: %s",
					last.UnreadableCount, strings.Join(last.Unreadable, ", "))
			case rewrapped == 0:
				fmt.Fprintln(out, "nothing was under the previous master key: if no rotation ran before, check that the two keys are not the wrong way round")
			}
			fmt.Fprintln(out, "a whole pass found no subject key under the previous master key: restart the replicas without LECTERN_DATA_KEY_PREVIOUS")
			return nil
		},
	}
}

func reportPass(out io.Writer, pass int, rep personal.RewrapReport) {
	fmt.Fprintf(out, "pass %d: rewrapped %d subject keys; %d were under the new key already; %d subjects are erased",
		pass, rep.Rewrapped, rep.Current, rep.Erased)
	if rep.Changed > 0 {
		fmt.Fprintf(out, "; %d changed while being rewrapped", rep.Changed)
	}
	fmt.Fprintln(out)
}
