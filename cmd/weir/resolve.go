package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// runResolveCmd is `weir run resolve`: settle an unknown outcome. It
// answers an unknown wait once: happened (the node goes on with the
// result) or not happened (the call is made once more).
func (m *Main) runResolveCmd() *cobra.Command {
	var happened, notHappened bool
	var result, reason string
	cmd := &cobra.Command{
		Use:   "resolve RUN WAIT_ID --happened [--result JSON] | --not-happened",
		Short: "Settle an unknown outcome of RUN: the call happened (with its result) or did not (it is made once more)",
		Long: `Resolve answers an unknown wait (kind unknown, NODE@VISIT.unknown.N, as 'weir run get'
shows it with the tool, its arguments, the idempotency key and when the call started): the
call of a tool that is not idempotent may or may not have happened, and nobody could tell.

--happened says it did: the node goes on its ok wire with --result (JSON or @file, checked
against the tool's output schema; null when left out) and the tool is never called again.
--not-happened says it did not: the call is made once more, with a new attempt. A wait is
answered once; --reason is journaled with who answered.`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if happened == notHappened {
				return usageErrorf("say --happened or --not-happened")
			}
			if notHappened && result != "" {
				return usageErrorf("--result goes with --happened: a call that did not happen answered nothing")
			}
			r, err := readJSONFlag("--result", result)
			if err != nil {
				return err
			}
			res, err := m.api().Resolve(cmd.Context(), args[0], args[1], happened, r, reason)
			if err != nil {
				return m.apiFailure(err)
			}
			answer := "not happened: the call is made once more"
			if res.Happened {
				answer = "happened: the node goes on with the result"
			}
			fmt.Fprintf(m.Stdout, "resolved %s at %s (wait %s): %s\n", res.RunID, res.Node, res.Wait, answer)
			return nil
		},
	}
	cmd.Flags().BoolVar(&happened, "happened", false, "the call had its effect")
	cmd.Flags().BoolVar(&notHappened, "not-happened", false, "the call had no effect: make it once more")
	cmd.Flags().StringVar(&result, "result", "", "with --happened: what the call answered, as JSON, or @file")
	cmd.Flags().StringVar(&reason, "reason", "", "why, recorded in the run's events")
	return cmd
}

// resolveCommand is the command that answers an unknown wait; "" for any
// other wait.
func resolveCommand(hw apitypes.HumanWait) string {
	if hw.Kind != apitypes.WaitUnknown {
		return ""
	}
	return fmt.Sprintf("weir run resolve %s %s --happened [--result JSON] | --not-happened [--reason TEXT]", hw.RunID, hw.ID)
}
