package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// runMigrateCmd is `weir run migrate`: move a parked run to the latest
// version of its flow, when it fits it.
func (m *Main) runMigrateCmd() *cobra.Command {
	var to, reason string
	cmd := &cobra.Command{
		Use:   "migrate RUN --to latest [--reason TEXT]",
		Short: "Move a parked RUN to the latest version of its flow, if its position and results fit it",
		Long: `Migrate moves a parked run (phase waiting: a person's or an event's wait, an unknown
outcome, retries exhausted, an agent's approvals, budget or runaway guard, its children) to
the newest registered version of its flow. Runs are pinned to the version they started on;
without a migration they stay on it. The run fits the new version when the node it is
parked at and every node it holds a result of exist there with the same kind, made by the
same tool or flow, an agent's kept answer satisfies the new output schema, and its open
waits exist: 'weir flow register' warns
(W_PARKED_INCOMPATIBLE) of the parked runs that do not. A run that does not fit is refused
with each misfit (E_INCOMPATIBLE), one that is not parked with E_NOT_WAITING; neither is
changed. The run stays parked where it was and goes on under the new version; its timeline
gains a migrated event naming both versions, who and --reason.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if to != "latest" {
				return usageErrorf("--to latest is the one version a run migrates to (got %q)", to)
			}
			res, err := m.api().RunMigrate(cmd.Context(), args[0], reason)
			if err != nil {
				return m.apiFailure(err)
			}
			if !res.Migrated {
				fmt.Fprintf(m.Stdout, "%s is on the latest version of %s already (%s): nothing changed\n", res.RunID, res.Flow, short(res.To))
				return nil
			}
			fmt.Fprintf(m.Stdout, "migrated %s from %s version %s to %s\n", res.RunID, res.Flow, short(res.From), short(res.To))
			return nil
		},
	}
	cmd.Flags().StringVar(&to, "to", "latest", "the version: latest (the newest registered version of the run's flow)")
	cmd.Flags().StringVar(&reason, "reason", "", "why, recorded in the run's events")
	return cmd
}
