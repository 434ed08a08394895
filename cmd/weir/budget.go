package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// budgetCommand is the command that raises the budget of the run a budget
// wait belongs to; "" for any other wait.
func budgetCommand(hw apitypes.HumanWait) string {
	if hw.Kind != apitypes.WaitBudget {
		return ""
	}
	return "weir run budget " + hw.RunID + " --add N [--reason TEXT]"
}

// runBudgetCmd is `weir run budget RUN --add N`: the run's owner raises
// its budget, and a run parked on a budget wait goes on.
func (m *Main) runBudgetCmd() *cobra.Command {
	var add int64
	var reason, requestID string
	cmd := &cobra.Command{
		Use:   "budget RUN --add N [--reason TEXT]",
		Short: "Raise RUN's budget by N: an agent parked on a budget wait (on_budget = \"ask\") goes on",
		Long: `Budget raises the run's budget by N, a positive integer, within the owner's
budget_per_hour if it has one. An agent that says on_budget = "ask" and is parked on a
budget wait (kind budget, NODE@VISIT.budget.N, showing what was spent and what its next
turn needs) reserves that turn again: it goes on if the new budget covers it, else it parks
on the same wait. Only the run's owner may; --reason is journaled with the raise. With
--request-id the raise is made once: the same command sent again (after a lost answer) says
so and changes nothing.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if add <= 0 {
				return usageErrorf("--add N takes a positive integer")
			}
			res, err := m.api().RunBudgetAdd(cmd.Context(), args[0], apitypes.BudgetAddRequest{Add: add, Reason: reason, RequestID: requestID})
			if err != nil {
				return m.apiFailure(err)
			}
			if res.Existing {
				fmt.Fprintf(m.Stdout, "budget of %s raised by this request id before: now %d (nothing changed)\n", res.RunID, res.Budget)
				return nil
			}
			fmt.Fprintf(m.Stdout, "budget of %s raised from %d to %d", res.RunID, res.Before, res.Budget)
			if res.Wait != "" {
				fmt.Fprintf(m.Stdout, " (wait %s woken)", res.Wait)
			}
			fmt.Fprintln(m.Stdout)
			return nil
		},
	}
	cmd.Flags().Int64Var(&add, "add", 0, "how much more the run may spend (a positive integer)")
	cmd.Flags().StringVar(&reason, "reason", "", "why, journaled with the raise")
	cmd.Flags().StringVar(&requestID, "request-id", "", "an id that makes the raise idempotent: sent again, it is not applied twice")
	return cmd
}
