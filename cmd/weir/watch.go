package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

func (m *Main) runWatchCmd() *cobra.Command {
	var tokens, asJSON bool
	var node string
	cmd := &cobra.Command{
		Use:   "watch RUN",
		Short: "Follow a run to its end, printing its events as they happen (--tokens: and its model turns' text as it arrives)",
		Long: `Watch follows RUN's event stream and prints each event, one a line, as it
happens, then the run's final state: exit 0 if it completed, 1 if it failed or
was cancelled.

--tokens also prints each model turn's text as the provider streams it, under a
line naming the turn (NODE@VISIT turn N). The text is live only: a turn that
started before the watch began is not shown (its answer is in its event), and
the daemon never waits for a slow watcher (the watch connects again and goes on
where it was). --node shows one node's turns only.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if node != "" && !tokens {
				return usageErrorf("--node needs --tokens")
			}
			var final *apitypes.Run
			tw := &turnWriter{w: m.Stdout}
			enc := json.NewEncoder(m.Stdout)
			err := m.api().RunStreamWith(cmd.Context(), args[0], client.RunStreamOptions{Deltas: tokens, Node: node}, func(msg client.StreamMessage) error {
				switch {
				case msg.Name == apitypes.StreamRun:
					final = msg.Run
				case asJSON && (msg.Event != nil || msg.Delta != nil):
					return enc.Encode(watchLine{Type: msg.Name, ID: msg.ID, Event: msg.Event, Delta: msg.Delta})
				case msg.Event != nil:
					tw.endLine()
					printEvents(m.Stdout, []apitypes.Event{*msg.Event})
				case msg.Delta != nil:
					tw.delta(*msg.Delta)
				}
				return nil
			})
			tw.endLine()
			if err != nil {
				return m.apiFailure(err)
			}
			if final == nil {
				return fmt.Errorf("the stream of %s ended without the run", args[0])
			}
			if asJSON {
				if err := enc.Encode(watchLine{Type: apitypes.StreamRun, Run: final}); err != nil {
					return err
				}
				if final.Phase != apitypes.PhaseCompleted {
					return exitCode(exitFailed)
				}
				return nil
			}
			return m.printFinal(final, false)
		},
	}
	cmd.Flags().BoolVar(&tokens, "tokens", false, "also print the model turns' text as it arrives")
	cmd.Flags().StringVar(&node, "node", "", "with --tokens, only this node's turns")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object a line: each event and text delta, then the run")
	return cmd
}

// watchLine is one line of 'weir run watch --json'.
type watchLine struct {
	Type  string              `json:"type"`
	ID    string              `json:"id,omitempty"`
	Event *apitypes.Event     `json:"event,omitempty"`
	Delta *apitypes.TurnDelta `json:"delta,omitempty"`
	Run   *apitypes.Run       `json:"run,omitempty"`
}

// turnWriter prints turns' text as it arrives: a line naming the turn when
// another turn's text (or the same turn's again, from its start) begins,
// or its text goes on after something else printed, then the text as it
// comes; endLine ends the text's line before anything else is printed.
type turnWriter struct {
	w       io.Writer
	turn    *apitypes.TurnDelta // the turn whose text was printed last
	midLine bool
}

func (t *turnWriter) delta(d apitypes.TurnDelta) {
	if t.turn == nil || t.turn.Node != d.Node || t.turn.Visit != d.Visit || t.turn.Turn != d.Turn || d.Offset < t.turn.End() {
		t.endLine()
		fmt.Fprintf(t.w, "%s@%d turn %d:\n", d.Node, d.Visit, d.Turn)
	}
	fmt.Fprint(t.w, d.Text)
	t.turn, t.midLine = &d, d.Text != "" && d.Text[len(d.Text)-1] != '\n'
}

func (t *turnWriter) endLine() {
	if t.midLine {
		fmt.Fprintln(t.w)
		t.midLine = false
	}
	t.turn = nil // the text that comes after what prints next is named again
}
