package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

// weir deadletter: the tasks that used up their tries, and sending them
// back (ls, show, redrive).
func init() {
	registerCommand(func(m *Main) *cobra.Command {
		cmd := &cobra.Command{Use: "deadletter", Short: "List, show and redrive tasks that exhausted their retries"}
		cmd.AddCommand(m.deadLetterLsCmd(), m.deadLetterShowCmd(), m.deadLetterRedriveCmd())
		return cmd
	})
}

func (m *Main) deadLetterLsCmd() *cobra.Command {
	var asJSON, quiet bool
	var f client.DeadLetterFilter
	var since time.Duration
	cmd := &cobra.Command{
		Use: "ls", Short: "List your dead letters, oldest first", Args: exactArgs(0),
		Long: `List your dead letters, oldest first: the task, its run, flow, node and tool,
how many tries failed, the last error and when it was dead-lettered.
--flow, --tool and --since DURATION (dead-lettered in the last DURATION)
narrow the list; --limit bounds it (default 100). --json prints every
try's error; --quiet only the task ids, one a line (for redrive).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if since < 0 {
				return usageErrorf("--since %s: want a positive duration such as 1h", since)
			}
			if since > 0 {
				f.Since = since.String()
			}
			dl, err := m.api().DeadLetters(cmd.Context(), f)
			if err != nil {
				return m.apiFailure(err)
			}
			switch {
			case asJSON:
				return printJSON(m.Stdout, dl)
			case quiet:
				for _, d := range dl {
					fmt.Fprintln(m.Stdout, d.TaskID)
				}
				return nil
			}
			return printDeadLetters(m.Stdout, dl)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the task ids")
	cmd.Flags().StringVar(&f.Flow, "flow", "", "only dead letters of runs of this flow")
	cmd.Flags().StringVar(&f.Tool, "tool", "", "only dead letters of calls of this tool")
	cmd.Flags().DurationVar(&since, "since", 0, "only those dead-lettered in the last DURATION (such as 1h)")
	cmd.Flags().IntVar(&f.Limit, "limit", 0, "at most this many (0: the daemon's page size, 100)")
	return cmd
}

// printDeadLetters prints dead letters as a table, or "none".
func printDeadLetters(w io.Writer, dl []apitypes.DeadLetter) error {
	return printTable(w, "TASK\tRUN\tFLOW\tNODE\tTOOL\tTRIES\tDEAD-LETTERED\tLAST ERROR", dl, func(d apitypes.DeadLetter) string {
		last := "-"
		if n := len(d.Errors); n > 0 {
			last = clipText(d.Errors[n-1].Code+": "+d.Errors[n-1].Message, 72)
		}
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s", d.TaskID, d.RunID, d.Flow, d.Node, dashIfEmpty(d.Tool), len(d.Errors),
			d.At.UTC().Format(time.RFC3339), last)
	})
}

func (m *Main) deadLetterShowCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use: "show TASK", Short: "Show a dead letter: every try's error, and its run", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := m.api().DeadLetter(cmd.Context(), args[0])
			return answer(m, d, err, asJSON, printDeadLetter)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printDeadLetter shows one dead letter, its tries and its run, and what
// can be done with it.
func printDeadLetter(w io.Writer, d *apitypes.DeadLetterDetail) {
	dl := d.DeadLetter
	fmt.Fprintf(w, "task:     %s\n", dl.TaskID)
	fmt.Fprintf(w, "flow:     %s, node %s", dl.Flow, dl.Node)
	if dl.Tool != "" {
		fmt.Fprintf(w, ", tool %s", dl.Tool)
	}
	fmt.Fprintf(w, "\ndead-lettered: %s, after %d tries\n", dl.At.UTC().Format(time.RFC3339), len(dl.Errors))
	for _, e := range dl.Errors {
		fmt.Fprintf(w, "  try %d  %s  %s: %s\n", e.Attempt, e.At.UTC().Format(time.RFC3339), e.Code, clipText(e.Message, 500))
	}
	switch run := d.Run; {
	case run == nil:
		fmt.Fprintf(w, "run:      %s, pruned by retention: it cannot be redriven\n", dl.RunID)
	case run.Phase.Terminal():
		fmt.Fprintf(w, "run:      %s %s: a redrive never reopens an ended run\n", run.ID, run.Phase)
		fmt.Fprintf(w, "  start it again from the node: weir run fork %s --from %s\n", run.ID, dl.Node)
	default:
		fmt.Fprintf(w, "run:      %s %s\n", run.ID, run.Phase)
		printWaits(w, run.ID, run.Waits)
	}
}

func (m *Main) deadLetterRedriveCmd() *cobra.Command {
	var asJSON bool
	var req apitypes.RedriveRequest
	var since time.Duration
	cmd := &cobra.Command{
		Use:   "redrive TASK... | --flow F | --tool T | --all",
		Short: "Send dead letters back to the queue; their runs go on",
		Long: `Send dead letters back to the queue: name them by task, or select yours of
a flow (--flow), of a tool (--tool, with --flow or alone) or all of them
(--all), in the last DURATION with --since. Each run that parked on its
task's exhaustion (on_exhausted = "park") resumes at the node, its tries
counted afresh and the same idempotency key, admitted like new work
within your share of the queue. A dead letter whose run has ended is
refused (E_RUN_ENDED): fork that run instead. --reason is journaled on
each run with who redrove it. Prints one line per task; exits 1 if any
was refused.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			req.TaskIDs = args
			if since < 0 {
				return usageErrorf("--since %s: want a positive duration such as 1h", since)
			}
			if since > 0 {
				req.Since = since.String()
			}
			if len(args) == 0 && req.Flow == "" && req.Tool == "" && !req.All {
				return commandUsageErrorf(cmd, "name the dead letters to redrive: TASK..., --flow F, --tool T or --all")
			}
			res, err := m.api().Redrive(cmd.Context(), req)
			if err != nil {
				return m.apiFailure(err)
			}
			if asJSON {
				if err := printJSON(m.Stdout, res); err != nil {
					return err
				}
			} else {
				printRedrive(m.Stdout, res)
			}
			for _, r := range res.Results {
				if !r.Redriven {
					return &exitError{code: exitFailed}
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&req.Flow, "flow", "", "your dead letters of runs of this flow")
	cmd.Flags().StringVar(&req.Tool, "tool", "", "your dead letters of calls of this tool")
	cmd.Flags().BoolVar(&req.All, "all", false, "all your dead letters")
	cmd.Flags().DurationVar(&since, "since", 0, "with --flow, --tool or --all: those dead-lettered in the last DURATION")
	cmd.Flags().StringVar(&req.Reason, "reason", "", "why, journaled on each run")
	cmd.Flags().StringVar(&req.RequestID, "request-id", "", "an id of this request, journaled with each redrive")
	return cmd
}

// printRedrive prints a redrive's answer: a line per task and a count.
func printRedrive(w io.Writer, res *apitypes.RedriveResponse) {
	done := 0
	for _, r := range res.Results {
		if r.Redriven {
			done++
			fmt.Fprintf(w, "%s  redriven  run %s  wait %s\n", r.TaskID, r.RunID, r.Wait)
			continue
		}
		msg := "refused"
		if r.Error != nil {
			msg = r.Error.Code + ": " + r.Error.Message
		}
		fmt.Fprintf(w, "%s  refused  %s\n", r.TaskID, msg)
	}
	fmt.Fprintf(w, "%d redriven, %d refused\n", done, len(res.Results)-done)
	if res.More {
		fmt.Fprintln(w, "more dead letters match: redrive again for the next ones")
	}
}

// redriveCommand is the command that ends an exhausted wait, naming the
// task its Shown holds; "" for any other wait.
func redriveCommand(hw apitypes.HumanWait) string {
	if hw.Kind != apitypes.WaitExhausted {
		return ""
	}
	var shown struct {
		Task string `json:"task"`
	}
	if json.Unmarshal(hw.Shown, &shown) != nil || shown.Task == "" {
		return ""
	}
	return "weir deadletter redrive " + shown.Task + " [--reason TEXT]"
}

// clipText bounds a text from the daemon printed in a listing.
func clipText(s string, max int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
