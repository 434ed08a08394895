package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// runForkCmd is weir run fork: a new run from a node visit of another,
// the work before it copied.
func (m *Main) runForkCmd() *cobra.Command {
	var from, input, version, requestID, reason string
	var allowEffects, asJSON bool
	cmd := &cobra.Command{
		Use:   "fork RUN --from NODE[@VISIT]",
		Short: "Start a new run from a node visit of RUN, its work before that copied",
		Long: `Start a new run, yours, from a node visit of RUN (--from NODE, its latest visit,
or NODE@VISIT): the results of the nodes RUN completed before that point are
copied, never run again, and from the point on the new run runs anew. RUN is
not changed. --input replaces RUN's input (checked against the flow's input
schema); --version latest runs the flow's latest version if the fork point
and the copied results fit it (E_FORK_POINT says what does not).

A fork that may call an at-most-once tool again after the point (a mail, a
payment) is refused with E_FORK_EFFECTS naming each call (file:line, tool);
--allow-effects accepts that. The answer lists what runs again. Re-sending
the same --request-id makes no second fork.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if from == "" {
				return usageErrorf("--from NODE[@VISIT] is required")
			}
			if version != apitypes.ForkPinned && version != apitypes.ForkLatest {
				return usageErrorf("--version must be %s or %s", apitypes.ForkPinned, apitypes.ForkLatest)
			}
			in, err := readInput(input)
			if err != nil {
				return err
			}
			res, err := m.api().Fork(cmd.Context(), args[0], apitypes.ForkRequest{From: from, Input: in, Version: version,
				AllowEffects: allowEffects, RequestID: requestID, Reason: reason})
			return answer(m, res, err, asJSON, printFork)
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the fork point: NODE (its latest visit) or NODE@VISIT")
	cmd.Flags().StringVar(&input, "input", "", "a new input as JSON, or @file (default: RUN's)")
	cmd.Flags().StringVar(&version, "version", apitypes.ForkPinned, "the flow version to run: pinned (RUN's) or latest")
	cmd.Flags().BoolVar(&allowEffects, "allow-effects", false, "accept that at-most-once calls after the point are made again")
	cmd.Flags().StringVar(&requestID, "request-id", "", "business id that makes the fork idempotent")
	cmd.Flags().StringVar(&reason, "reason", "", "why, journaled on both runs")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printFork prints a fork's answer: the new run's id first, on its own
// line, for scripts.
func printFork(w io.Writer, res *apitypes.ForkResult) {
	fmt.Fprintln(w, res.RunID)
	f := res.ForkedFrom
	if res.Existing {
		fmt.Fprintf(w, "  (made before by this request id, from %s at %s@%d)\n", f.RunID, f.Node, f.Visit)
		return
	}
	fmt.Fprintf(w, "  forked from %s at %s@%d, version %s\n", f.RunID, f.Node, f.Visit, short(res.Version))
	fmt.Fprintf(w, "  copied:    %s\n", listOrNone(res.Copied))
	if len(res.NotCopied) > 0 {
		fmt.Fprintf(w, "  not copied (ran again after the point in %s): %s\n", f.RunID, listOrNone(res.NotCopied))
	}
	fmt.Fprintf(w, "  runs again: %s\n", listOrNone(res.Reruns))
	for _, s := range res.Effects {
		fmt.Fprintf(w, "  at-most-once again: %s  %s.%s  %s\n", s.Pos, s.Flow, s.Node, s.Tool)
	}
}

func listOrNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	out := xs[0]
	for _, x := range xs[1:] {
		out += ", " + x
	}
	return out
}

// printLineage is weir run ls --lineage RUN: the family, the root first.
func (m *Main) printLineage(cmd *cobra.Command, id string, asJSON bool) error {
	vs, err := m.api().RunLineage(cmd.Context(), id)
	if err != nil {
		return m.apiFailure(err)
	}
	if asJSON {
		return printJSON(m.Stdout, vs)
	}
	return printTable(m.Stdout, "RUN\tFLOW\tPHASE\tCREATED\tFORKED FROM", vs, func(v apitypes.Run) string {
		from := "-"
		if f := v.ForkedFrom; f != nil {
			from = fmt.Sprintf("%s at %s@%d", f.RunID, f.Node, f.Visit)
		}
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", v.ID, v.Flow, v.Phase, v.CreatedAt, from)
	})
}

// printLineageOf prints, for weir run get, where a run came from: what a
// forked run was forked from, what started a run the daemon started
// itself, and the request id it was started under.
func printLineageOf(w io.Writer, v *apitypes.Run) {
	if f := v.ForkedFrom; f != nil {
		fmt.Fprintf(w, "forked from: %s at %s@%d (weir run ls --lineage %s)\n", f.RunID, f.Node, f.Visit, v.ID)
	}
	if v.StartedBy != "" {
		fmt.Fprintf(w, "started by: %s\n", v.StartedBy)
	}
	if v.RequestID != "" {
		fmt.Fprintf(w, "request id: %s\n", v.RequestID)
	}
}
