package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"lectern/projections"
)

// projectionsCmd is `lectern projections dead-letters list|retry|skip`: the
// events a projection could not apply, and an operator's answer to them.
func projectionsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "projections", Short: "Inspect the projections that build the read models"}
	dl := &cobra.Command{
		Use:   "dead-letters",
		Short: "Events a projection could not apply (docs/operations.md)",
	}
	var all bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the events projections stopped on (with --all: also those skipped or resolved)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pool, err := connectEnv(cmd.Context())
			if err != nil {
				return err
			}
			defer pool.Close()
			letters, err := projections.ListDeadLetters(cmd.Context(), pool, all)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			_, _ = fmt.Fprintln(w, "PROJECTION\tEVENT ID\tTYPE\tSTREAM\tPOSITION\tSTATUS\tFAILURES\tLAST FAILED\tRESOLVED BY\tERROR")
			for _, d := range letters {
				by := d.ResolvedBy
				if by == "" {
					by = "-"
				}
				_, _ = fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", d.Projection, d.EventID, d.EventType, d.StreamID, d.Position,
					d.Status, d.Failures, d.UpdatedAt.UTC().Format(time.RFC3339), by, d.Error)
			}
			return w.Flush()
		},
	}
	list.Flags().BoolVar(&all, "all", false, "also list dead letters that were skipped or resolved")
	resolve := func(action, short string) *cobra.Command {
		return &cobra.Command{
			Use:   action + " PROJECTION EVENT_ID",
			Short: short,
			Args:  cobra.ExactArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				pool, err := connectEnv(cmd.Context())
				if err != nil {
					return err
				}
				defer pool.Close()
				actor := cliActor("projections dead-letters " + action)
				if err := projections.ResolveDeadLetter(cmd.Context(), pool, args[0], args[1], action, actor); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s of event %s asked of projection %s; it restarts within a second wherever it runs\n", action, args[1], args[0])
				return nil
			},
		}
	}
	dl.AddCommand(list,
		resolve(projections.DeadLetterRetry, "Apply the event again (after fixing what made it fail)"),
		resolve(projections.DeadLetterSkip, "Pass over the event: the read model will not reflect it"))
	cmd.AddCommand(dl)
	return cmd
}
