package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/propagation"

	"github.com/weirhq/weir/internal/textbound"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

func init() {
	registerCommand(func(m *Main) *cobra.Command {
		cmd := &cobra.Command{Use: "run", Short: "Start, inspect and cancel runs on the daemon"}
		cmd.AddCommand(m.runStartCmd(), m.runGetCmd(), m.runLsCmd(), m.runCancelCmd(), m.runEventsCmd(), m.runDecideCmd(true), m.runDecideCmd(false), m.runRespondCmd(), m.runGraphCmd(), m.runWaitCmd(), m.runWatchCmd(),
			m.runForkCmd(), m.runResolveCmd(), m.runMigrateCmd(), m.runBudgetCmd(), m.runExportCmd())
		return cmd
	})
	registerCommand(func(m *Main) *cobra.Command {
		var asJSON, owners bool
		cmd := &cobra.Command{
			Use: "stats", Short: "Show the four figures per tool: queue depth, wait, execution time, amplification", Args: exactArgs(0),
			Long: `Show the four figures per tool (or node kind): QUEUED, its tasks ready and
waiting for a slot when the daemon last sampled (every 10 s); the mean wait
from ready to leased and the mean execution time; and the attempts, units
and amplification (attempts per unit of work, 1 without retries). --json
prints the same (queue_depth, wait_mean_ns, ...).

--owners shows each owner instead: RUNNING (started, not ended), QUEUED
(accepted, not started), SPENT (cost settled in the last hour) and its
share (weight, max_running, max_queued, budget_per_hour; - for none).
The daemon's own OS user on the Unix socket sees every owner; anyone else
sees only their own row.`,
			RunE: func(cmd *cobra.Command, args []string) error {
				if owners {
					l, err := m.api().StatsOwners(cmd.Context())
					return answer(m, l, err, asJSON, printOwnerStats)
				}
				st, err := m.api().Stats(cmd.Context())
				return answer(m, st, err, asJSON, printStats)
			},
		}
		cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
		cmd.Flags().BoolVar(&owners, "owners", false, "show each owner's running and queued runs, spend in the last hour and share")
		return cmd
	})
}

// printOwnerStats is the table of weir stats --owners.
func printOwnerStats(w io.Writer, l *apitypes.OwnerStatsList) {
	orNone := func(n int64) string {
		if n == 0 {
			return "-"
		}
		return strconv.FormatInt(n, 10)
	}
	fmt.Fprintf(w, "%-24s %8s %8s %10s %6s %11s %10s %15s\n", "OWNER", "RUNNING", "QUEUED", "SPENT(1h)", "WEIGHT", "MAX_RUNNING", "MAX_QUEUED", "BUDGET_PER_HOUR")
	for _, o := range l.Owners {
		fmt.Fprintf(w, "%-24s %8d %8d %10d %6d %11s %10s %15s\n", o.Owner, o.Running, o.Queued, o.Spent, o.Weight,
			orNone(int64(o.MaxRunning)), orNone(int64(o.MaxQueued)), orNone(o.BudgetPerHour))
	}
	if !l.All {
		fmt.Fprintln(w, "(your own figures only: the daemon's own user on its socket sees every owner)")
	}
}

// printAgent shows what an agent node's latest visit did so far.
func printAgent(w io.Writer, a apitypes.Agent) {
	fmt.Fprintf(w, "agent:    %s (visit %d): %s, %d tokens in, %d out, cost %d", a.Node, a.Visit, count(a.Turns, "turn"), a.InputTokens, a.OutputTokens, a.Cost)
	if a.CutTurns > 0 {
		fmt.Fprintf(w, "; %s cut off by crashes, at most %d more", count(a.CutTurns, "ask"), a.CutReserved)
	}
	if a.RetriedTurns > 0 {
		fmt.Fprintf(w, "; %s retried, %d tokens in and %d out billed for them", count(a.RetriedTurns, "failed turn"), a.RetriedInputTokens, a.RetriedOutputTokens)
	}
	fmt.Fprintln(w)
}

func printStats(w io.Writer, st *apitypes.Stats) {
	fmt.Fprintf(w, "%-24s %7s %12s %12s %9s %7s %6s\n", "TYPE", "QUEUED", "WAIT(mean)", "EXEC(mean)", "ATTEMPTS", "UNITS", "AMPL")
	for _, t := range st.Types {
		fmt.Fprintf(w, "%-24s %7d %12s %12s %9d %7d %6.2f\n", t.Type, t.QueueDepth, t.WaitMean.Round(time.Microsecond), t.ExecMean.Round(time.Microsecond), t.Attempts, t.Units, t.Amplification)
	}
	if len(st.Refusals) > 0 {
		fmt.Fprintln(w, "refused:")
		for k, v := range st.Refusals {
			fmt.Fprintf(w, "  %s %d\n", k, v)
		}
	}
	if len(st.Models) > 0 {
		fmt.Fprintf(w, "\n%-32s %7s %12s %12s %10s\n", "MODEL", "TURNS", "TOKENS IN", "TOKENS OUT", "COST")
		for _, m := range st.Models {
			fmt.Fprintf(w, "%-32s %7d %12d %12d %10d\n", m.Model, m.Turns, m.InputTokens, m.OutputTokens, m.Cost)
		}
		for _, m := range st.Models {
			if m.CutTurns > 0 {
				fmt.Fprintf(w, "%s: %d asks of turns cut off by crashes before their answers were written, at most %d more cost (their reservations)\n", m.Model, m.CutTurns, m.CutReserved)
			}
			if m.RetriedTurns > 0 {
				fmt.Fprintf(w, "%s: %d failed tries of turns retried, %d tokens in and %d out reported for them\n", m.Model, m.RetriedTurns, m.RetriedInputTokens, m.RetriedOutputTokens)
			}
		}
		printModelLimits(w, st.Models)
	}
}

// printModelLimits shows each model's use of its provider limits: what
// admission holds turns to on this daemon.
func printModelLimits(w io.Writer, models []apitypes.ModelStats) {
	limit := func(used, max int64) string {
		if max == 0 {
			return "-"
		}
		return fmt.Sprintf("%d/%d", used, max)
	}
	header := false
	for _, m := range models {
		if m.MaxConcurrent == 0 && m.RequestsPerMinute == 0 && m.TokensPerMinute == 0 {
			continue
		}
		if !header {
			fmt.Fprintf(w, "\n%-32s %11s %13s %17s %7s %7s\n", "MODEL LIMITS", "IN FLIGHT", "TURNS/MIN", "TOKENS/MIN", "IN LINE", "WAITED")
			header = true
		}
		fmt.Fprintf(w, "%-32s %11s %13s %17s %7d %7d\n", m.Model, limit(m.InFlight, m.MaxConcurrent), limit(m.StartedLastMinute, m.RequestsPerMinute),
			limit(m.TokensLastMinute, m.TokensPerMinute), m.Booked, m.Waited)
		if !m.PausedUntil.IsZero() {
			fmt.Fprintf(w, "%s: the provider asked to wait until %s\n", m.Model, m.PausedUntil.UTC().Format(time.RFC3339))
		}
	}
}

// apiFailure turns an API error into the command's error (exit 1), with
// usage-class errors kept apart. A daemon that is not running is said
// plainly.
func (m *Main) apiFailure(err error) error {
	if u := m.untrusted(err); u != nil {
		err = u
	} else if errors.Is(err, client.ErrNoDaemon) {
		err = fmt.Errorf("no weir daemon answers on %s: start one with 'weir serve' (or pass --socket or --address)", m.daemonAt())
	}
	return &exitError{code: exitFailed, err: err}
}

func (m *Main) runStartCmd() *cobra.Command {
	var input, requestID, traceParent, traceState string
	var wait, follow, asJSON bool
	cmd := &cobra.Command{
		Use:   "start FLOW",
		Short: "Start a run of FLOW and print its id",
		Long: `Start a run of FLOW and print its id. Re-sending the same --request-id with the
same flow and input returns the same run; with a different flow or input it
is refused (E_DEDUP_CONFLICT names the run the id started and its flow).
With --wait, follow the run and print its final state: exit 0 if it
completed, 1 if it failed or was cancelled. A run that stops for a person's
decision ends the wait there, as 'weir exec' does: the open decisions and
the commands that decide them are printed and the exit status is 3.
--follow keeps following through decisions to the end.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in, err := readInput(input)
			if err != nil {
				return err
			}
			c := m.api()
			ctx := cmd.Context()
			if traceParent != "" {
				// A malformed one is ignored, as the W3C spec says.
				ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceParent, "tracestate": traceState})
			}
			res, err := c.RunStart(ctx, apitypes.StartRequest{Flow: args[0], Input: in, RequestID: requestID})
			if err != nil {
				return m.apiFailure(err)
			}
			if !wait && !follow {
				if asJSON {
					return printJSON(m.Stdout, res)
				}
				fmt.Fprintln(m.Stdout, res.RunID)
				return nil
			}
			if !asJSON {
				fmt.Fprintln(m.Stderr, "run", res.RunID)
			}
			return m.follow(cmd.Context(), c, res.RunID, asJSON, follow)
		},
	}
	cmd.Flags().StringVar(&input, "input", "", "run input as JSON, or @file")
	cmd.Flags().StringVar(&requestID, "request-id", "", "business id that makes the start idempotent")
	cmd.Flags().StringVar(&traceParent, "traceparent", "", "a W3C traceparent: the run's trace joins the caller's (the daemon's telemetry block)")
	cmd.Flags().StringVar(&traceState, "tracestate", "", "the W3C tracestate that goes with --traceparent")
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the run to its end, or to a decision a person must take (exit 3)")
	cmd.Flags().BoolVar(&follow, "follow", false, "follow the run to its end, through decisions")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// follow holds reads of a run until it is terminal, printing each new phase and
// node, then prints the final state. The exit code says how it ended.
// Unless through, it stops where the run waits for a person's decision
// and prints how to take it (exit 3).
func (m *Main) follow(ctx context.Context, c *client.Client, id string, asJSON, through bool) error {
	live := newLiveLine(m.Stderr)
	// With a progress line, the run is read at least every 50 ms to show it.
	p := client.RunWaitParams{Poll: 50 * time.Millisecond}
	if !asJSON {
		p.Seen = func(v *apitypes.Run) { live.show(progressLine(v)) }
	}
	if !through {
		p.Until = apitypes.PhaseWaiting
	}
	for {
		v, err := c.RunWait(ctx, id, p)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			live.done()
			return m.apiFailure(err)
		}
		if v.Phase.Terminal() {
			live.done()
			return m.printFinal(v, asJSON)
		}
		// Waiting: for a person, or only for a child run or a fan-out.
		ws, err := c.RunWaits(ctx, id)
		if err != nil {
			live.done()
			return m.apiFailure(err)
		}
		if len(ws) > 0 {
			live.done()
			return m.stopAtDecision(v, ws, asJSON)
		}
		// Until a decision opens or the run ends, held by the daemon; the
		// progress line is shown again each followRefresh.
		hctx, cancel := context.WithTimeout(ctx, followRefresh)
		_, err = c.RunWaitUntil(hctx, id, apitypes.UntilDecision)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			live.done()
			return m.apiFailure(err)
		}
	}
}

// followRefresh is how often run start --wait reads a run parked on a
// child or a fan-out again, to show its progress.
const followRefresh = time.Second

// stopAtDecision ends run start --wait at a run's open decisions: what
// they are and the commands that take them, exit 3.
func (m *Main) stopAtDecision(v *apitypes.Run, ws []apitypes.HumanWait, asJSON bool) error {
	if asJSON {
		_ = printJSON(m.Stdout, v)
		return exitCode(exitWaiting)
	}
	fmt.Fprintf(m.Stdout, "%s waiting\n", v.ID)
	printWaits(m.Stdout, v.ID, ws)
	fmt.Fprintf(m.Stdout, "then follow it on: weir run wait %s\n", v.ID)
	return exitCode(exitWaiting)
}

// printFinal prints a terminal run and turns its phase into the exit code.
func (m *Main) printFinal(v *apitypes.Run, asJSON bool) error {
	if asJSON {
		_ = printJSON(m.Stdout, v)
	} else {
		fmt.Fprintf(m.Stdout, "%s %s\n", v.ID, v.Phase)
		if len(v.Output) > 0 {
			fmt.Fprintf(m.Stdout, "output: %s\n", v.Output)
		}
		if v.Error != nil {
			fmt.Fprintf(m.Stdout, "error: %s: %s\n", v.Error.Code, v.Error.Message)
		}
	}
	if v.Phase == apitypes.PhaseCompleted {
		return nil
	}
	return exitCode(exitFailed)
}

func (m *Main) runGetCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use: "get RUN", Short: "Show a run", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := m.api().RunGet(cmd.Context(), args[0])
			if err != nil {
				return m.apiFailure(err)
			}
			if asJSON {
				return printJSON(m.Stdout, runWithCommands(v))
			}
			fmt.Fprintf(m.Stdout, "id:       %s\nflow:     %s (version %s)\nowner:    %s\nphase:    %s\nattempt:  %d\n", v.ID, v.Flow, short(v.Version), v.Owner, v.Phase, v.Attempt)
			if v.Budget > 0 {
				fmt.Fprintf(m.Stdout, "budget:   %d (spent %d, held by children in flight %d)\n", v.Budget, v.Spent, v.Escrow)
			}
			if v.Progress != nil && v.Progress.Node != "" {
				fmt.Fprintf(m.Stdout, "node:     %s\n", v.Progress.Node)
			}
			if v.Parent != "" {
				fmt.Fprintf(m.Stdout, "parent:   %s (weir run get %s)\n", v.Parent, v.Parent)
			}
			printLineageOf(m.Stdout, v)
			if v.Progress != nil {
				for _, a := range v.Progress.Agents {
					printAgent(m.Stdout, a)
				}
				for _, c := range v.Progress.Cohorts {
					printCohort(m.Stdout, c)
				}
			}
			printWaits(m.Stdout, v.ID, v.Waits)
			if len(v.Output) > 0 {
				fmt.Fprintf(m.Stdout, "output:   %s\n", v.Output)
			}
			if v.Error != nil {
				fmt.Fprintf(m.Stdout, "error:    %s: %s\n", v.Error.Code, v.Error.Message)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (m *Main) runLsCmd() *cobra.Command {
	var asJSON bool
	var phase, flow, before, lineage string
	var limit int
	cmd := &cobra.Command{
		Use: "ls", Short: "List your runs, newest first, with their phase, when they were created and their parent", Args: exactArgs(0),
		Long: "List your runs, newest first, a page at a time (--limit, 100 if not given). A full page ends\n" +
			"with the command that lists the next one: --before the last run listed.",
		RunE: func(cmd *cobra.Command, args []string) error {
			if lineage != "" {
				return m.printLineage(cmd, lineage, asJSON)
			}
			if limit < 0 || limit > apitypes.MaxListLimit {
				return usageErrorf("--limit must be from 1 to %d (0: the daemon's page size)", apitypes.MaxListLimit)
			}
			vs, err := m.api().RunList(cmd.Context(), client.RunListParams{
				Phase: apitypes.Phase(phase), Flow: flow, Newest: true, Before: before, Limit: limit})
			if err != nil {
				return m.apiFailure(err)
			}
			if asJSON {
				return printJSON(m.Stdout, vs)
			}
			if err := printTable(m.Stdout, "RUN\tFLOW\tPHASE\tATTEMPT\tCREATED\tPARENT", vs, func(v apitypes.Run) string {
				return fmt.Sprintf("%s\t%s\t%s\t%d\t%s\t%s", v.ID, v.Flow, v.Phase, v.Attempt, v.CreatedAt, parentOrDash(v.Parent))
			}); err != nil || len(vs) == 0 {
				return err
			}
			if page := cmp.Or(limit, apitypes.DefaultListLimit); len(vs) == page {
				next := []string{"weir run ls"}
				if flow != "" {
					next = append(next, "--flow "+flow)
				}
				if phase != "" {
					next = append(next, "--phase "+phase)
				}
				if limit != 0 {
					next = append(next, fmt.Sprintf("--limit %d", limit))
				}
				next = append(next, "--before "+vs[len(vs)-1].ID)
				fmt.Fprintf(m.Stdout, "(more: %s)\n", strings.Join(next, " "))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&phase, "phase", "", "only runs in this phase")
	cmd.Flags().StringVar(&flow, "flow", "", "only runs of this flow")
	cmd.Flags().StringVar(&before, "before", "", "the page after this run: the last run the page before listed")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many runs (0: the daemon's page size, 100)")
	cmd.Flags().StringVar(&lineage, "lineage", "", "list RUN's family instead: the run it was forked from and its forks")
	return cmd
}

// parentOrDash shows a top-level run's parent as "-".
func parentOrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (m *Main) runCancelCmd() *cobra.Command {
	return &cobra.Command{
		Use: "cancel RUN", Short: "Cancel a run: prints requested, too_late or already_terminal", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := m.api().RunCancel(cmd.Context(), args[0])
			if err != nil {
				return m.apiFailure(err)
			}
			fmt.Fprintln(m.Stdout, a)
			return nil
		},
	}
}

func (m *Main) runEventsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use: "events RUN", Short: "Print a run's timeline, one event a line", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			evs, err := m.api().RunEvents(cmd.Context(), args[0], client.EventListParams{})
			return answer(m, evs, err, asJSON, printEvents)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// eventTime is how an event's time prints: the full date, UTC, to the
// microsecond (a run may last days).
const eventTime = "2006-01-02T15:04:05.000000Z"

// printEvents writes a timeline one event a line.
func printEvents(w io.Writer, evs []apitypes.Event) {
	for _, e := range evs {
		fmt.Fprintf(w, "%s  %-16s attempt %d", e.At.UTC().Format(eventTime), e.Type, e.Attempt)
		if e.Node != "" {
			fmt.Fprintf(w, "  node %s", e.Node)
		}
		for _, k := range sortedKeys(e.Detail) {
			fmt.Fprintf(w, "  %s=%s", k, detailValue(e.Detail[k]))
		}
		fmt.Fprintln(w)
	}
}

// detailValue prints an event detail's value as JSON, so that a map or a
// list reads as it does in --json; a plain word prints without quotes.
func detailValue(v any) string {
	if s, ok := v.(string); ok && plainWord(s) {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%q", fmt.Sprint(v))
	}
	return string(b)
}

// plainWord: no space, quote, '=' or control character, not empty, and
// not what JSON would read as another type.
func plainWord(s string) bool {
	if s == "" || s == "true" || s == "false" || s == "null" {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r == '"' || r == '=' || r == '\\' || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// runDecideCmd is `weir run approve` (approve) or `weir run reject`.
func (m *Main) runDecideCmd(approve bool) *cobra.Command {
	var payload, reason, digest string
	cmd := &cobra.Command{Args: exactArgs(2)}
	if approve {
		cmd.Use, cmd.Short = "approve RUN NODE|WAIT_ID", "Approve a decision of RUN: a wait node's (the payload becomes its result) or an agent's proposed call (it runs; with --payload, with those arguments instead)"
		cmd.Flags().StringVar(&payload, "payload", "", "the decision's payload as JSON, or @file: a wait node's result, or the edited arguments an agent's proposed call runs with")
	} else {
		cmd.Use, cmd.Short = "reject RUN NODE|WAIT_ID", "Reject a decision of RUN: a wait node takes its error wire; an agent's model is told the reason"
		cmd.Flags().StringVar(&reason, "reason", "", "why, recorded in the run's events")
	}
	cmd.Flags().StringVar(&digest, "digest", "", "the digest of the proposed call you decide on (an agent's approval shows it): refused if the wait shows another")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		req := apitypes.DecideRequest{Reason: reason, Digest: digest}
		if approve {
			p, perr := readJSONFlag("--payload", payload)
			if perr != nil {
				return perr
			}
			req.Payload = p
		}
		res, err := m.api().RunDecide(cmd.Context(), args[0], args[1], approve, req)
		if err != nil {
			return m.apiFailure(err)
		}
		fmt.Fprintf(m.Stdout, "%s %s at %s", res.Decision, res.RunID, res.Node)
		if res.Wait != "" {
			fmt.Fprintf(m.Stdout, " (wait %s)", res.Wait)
		}
		fmt.Fprintln(m.Stdout)
		return nil
	}
	return cmd
}

// runRespondCmd is `weir run respond`: an agent's proposed call answered
// in the tool's place.
func (m *Main) runRespondCmd() *cobra.Command {
	var result, digest string
	cmd := &cobra.Command{Use: "respond RUN NODE|WAIT_ID --result JSON", Args: exactArgs(2),
		Short: "Answer an agent's proposed call of RUN in the tool's place: the result is the call's, and the tool never runs"}
	cmd.Flags().StringVar(&result, "result", "", "the call's result as JSON, or @file (checked against the tool's output schema)")
	cmd.Flags().StringVar(&digest, "digest", "", "the digest of the proposed call you answer (the wait shows it): refused if the wait shows another")
	_ = cmd.MarkFlagRequired("result")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		r, err := readJSONFlag("--result", result)
		if err != nil {
			return err
		}
		res, err := m.api().RunRespond(cmd.Context(), args[0], args[1], r, digest)
		if err != nil {
			return m.apiFailure(err)
		}
		fmt.Fprintf(m.Stdout, "%s %s at %s (wait %s)\n", res.Decision, res.RunID, res.Node, res.Wait)
		return nil
	}
	return cmd
}

// printCohort shows one fan-out's cohort: what it admitted, what is in
// flight, what was published and judged mature, what came late, and how it
// closed.
func printCohort(w io.Writer, c apitypes.Cohort) {
	fmt.Fprintf(w, "fan-out:  %s (visit %d) %s: %d items, admitted %d, in flight %d, published %d, mature %d of %d needed, failed %d, stopped %d, late %d",
		c.Node, c.Visit, c.State, c.Items, c.Admitted, c.InFlight, c.Published, c.Mature, c.Need, c.Failed, c.Stopped, c.Late)
	if c.Sufficient != nil {
		verdict := "sufficient"
		if !*c.Sufficient {
			verdict = "INSUFFICIENT"
		}
		fmt.Fprintf(w, ", cutoff %s, closed %s", c.Cutoff.UTC().Format(time.RFC3339Nano), verdict)
	}
	if len(c.Unknown) > 0 {
		fmt.Fprintf(w, ", outcome unknown (E_OUTCOME_UNKNOWN) for items %s", strings.ReplaceAll(strings.Trim(fmt.Sprint(c.Unknown), "[]"), " ", ", "))
	}
	fmt.Fprintln(w)
}

// runWaitCmd is `weir run wait`: block until a run reaches a phase or a
// decision is open, for scripts (like kubectl wait).
func (m *Main) runWaitCmd() *cobra.Command {
	var until, decision string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait RUN",
		Short: "Wait until a run is in a phase (default: terminal) or waits for a decision, for scripts",
		Long: `Wait holds until the run meets --until: a phase name (queued, running, waiting,
completed, cancelled, failed), "terminal", or "decision": a decision (a wait node,
or a tool call an agent proposed) is open in the run or its descendants.
--decision NODE|WAIT_ID waits for that one decision to be open.

With a phase it prints the phase; with a decision it prints the id of each
open decision that meets it, one a line (what 'weir run approve RUN WAIT_ID'
takes). It exits 0 when the condition holds, 1 if the run ends without it or
--timeout passes first.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cond := until
			if decision != "" {
				if cmd.Flags().Changed("until") {
					return usageErrorf("--until and --decision: give one")
				}
				cond = apitypes.UntilDecision + ":" + decision
			}
			switch apitypes.Phase(cond) {
			case apitypes.UntilTerminal, apitypes.UntilDecision, apitypes.PhaseQueued, apitypes.PhaseRunning, apitypes.PhaseWaiting, apitypes.PhaseCompleted, apitypes.PhaseCancelled, apitypes.PhaseFailed:
			default:
				if !strings.HasPrefix(cond, apitypes.UntilDecision+":") || cond == apitypes.UntilDecision+":" {
					return usageErrorf("--until %q: a phase, terminal, decision or decision:NODE|WAIT_ID", until)
				}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			res, err := m.api().RunWaitUntil(ctx, args[0], cond)
			// The deadline is --timeout's once the client says so, even if
			// ctx's own timer has not fired yet on a loaded machine.
			timedOut := (ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded)) && cmd.Context().Err() == nil
			switch {
			case err != nil && res != nil && res.Run != nil && timedOut:
				return &exitError{code: exitFailed, err: fmt.Errorf("run %s still %s after %s, never %s", res.Run.ID, res.Run.Phase, timeout, cond)}
			case err != nil && timedOut:
				return &exitError{code: exitFailed, err: fmt.Errorf("run %s: no answer within %s", args[0], timeout)}
			case err != nil:
				return m.apiFailure(err)
			case !res.Met:
				return &exitError{code: exitFailed, err: fmt.Errorf("run %s ended %s, never %s", res.Run.ID, res.Run.Phase, cond)}
			}
			if len(res.Decisions) == 0 {
				fmt.Fprintln(m.Stdout, res.Run.Phase)
			}
			for _, w := range res.Decisions {
				fmt.Fprintln(m.Stdout, w.ID)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&until, "until", "terminal", "a phase, terminal, or decision (any open decision)")
	cmd.Flags().StringVar(&decision, "decision", "", "wait until the decision at this node, or with this wait id, is open")
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "give up after this long")
	return cmd
}

// decideCommands are the commands that decide an open decision: named by
// its node where it is the only one open there, else by its wait id.
func decideCommands(hw apitypes.HumanWait, ws []apitypes.HumanWait) (approve, reject string) {
	if !hw.NeedsDecision() {
		return "", ""
	}
	name := decisionName(hw, ws)
	if hw.Kind == apitypes.WaitRunaway {
		// Approve resumes the agent; reject ends its node (weir run
		// cancel ends the whole run).
		return fmt.Sprintf(`weir run approve %s %s [--payload '{"note":"TEXT for the model"}']`, hw.RunID, name), fmt.Sprintf("weir run reject %s %s [--reason TEXT]", hw.RunID, name)
	}
	if hw.Kind == apitypes.WaitApproval {
		return fmt.Sprintf("weir run approve %s %s", hw.RunID, name), fmt.Sprintf("weir run reject %s %s --reason TEXT", hw.RunID, name)
	}
	return fmt.Sprintf("weir run approve %s %s [--payload JSON]", hw.RunID, name), fmt.Sprintf("weir run reject %s %s [--reason TEXT]", hw.RunID, name)
}

// runJSON is a run as 'weir run get --json' prints it: the API's view,
// its open waits with the commands that decide them.
type runJSON struct {
	*apitypes.Run
	Waits []waitJSON `json:"waits,omitempty"`
}

type waitJSON struct {
	apitypes.HumanWait
	// Edit and Respond are the commands that edit an agent's proposed
	// call or answer it in the tool's place.
	Approve string `json:"approve,omitempty"`
	Reject  string `json:"reject,omitempty"`
	Edit    string `json:"edit,omitempty"`
	Respond string `json:"respond,omitempty"`
	// Budget is the command that raises the run's budget, under a budget
	// wait.
	Budget string `json:"budget,omitempty"`
}

func runWithCommands(v *apitypes.Run) runJSON {
	out := runJSON{Run: v}
	for _, hw := range v.Waits {
		a, r := decideCommands(hw, v.Waits)
		ed, rs := callCommands(hw, v.Waits)
		out.Waits = append(out.Waits, waitJSON{HumanWait: hw, Approve: a, Reject: r, Edit: ed, Respond: rs, Budget: budgetCommand(hw)})
	}
	return out
}

// decisionName is how a command names the open decision hw: by its node
// where it is the only one open there, else by its wait id.
func decisionName(hw apitypes.HumanWait, ws []apitypes.HumanWait) string {
	n := 0
	for _, o := range ws {
		if o.NeedsDecision() && o.RunID == hw.RunID && o.Node == hw.Node {
			n++
		}
	}
	if n == 1 {
		return hw.Node
	}
	return hw.ID
}

// callCommands are the commands that edit an agent's proposed call or
// answer it in the tool's place, bound to the proposal shown by its
// digest; "" for any other wait.
func callCommands(hw apitypes.HumanWait, ws []apitypes.HumanWait) (edit, respond string) {
	if hw.Kind != apitypes.WaitApproval {
		return "", ""
	}
	name, bind := decisionName(hw, ws), ""
	if hw.Digest != "" {
		bind = " --digest " + hw.Digest
	}
	return fmt.Sprintf("weir run approve %s %s --payload ARGS%s", hw.RunID, name, bind), fmt.Sprintf("weir run respond %s %s --result JSON%s", hw.RunID, name, bind)
}

// runawayDiagnosis is a runaway wait's diagnosis in a line: the repeated
// call (or the error in a row), the count against the limit, the turns
// and the tokens spent since; "" for any other wait.
func runawayDiagnosis(hw apitypes.HumanWait) string {
	if hw.Kind != apitypes.WaitRunaway {
		return ""
	}
	var d struct {
		Why          string          `json:"why"`
		Tool         string          `json:"tool"`
		Arguments    json.RawMessage `json:"arguments"`
		ErrorCode    string          `json:"error_code"`
		Count        int             `json:"count"`
		Limit        int             `json:"limit"`
		FirstTurn    int             `json:"first_turn"`
		LastTurn     int             `json:"last_turn"`
		InputTokens  int64           `json:"input_tokens_since"`
		OutputTokens int64           `json:"output_tokens_since"`
	}
	if json.Unmarshal(hw.Shown, &d) != nil {
		return ""
	}
	what := fmt.Sprintf("%s %s answered the same %d times (repeat_limit %d)", d.Tool, textbound.Quote(string(d.Arguments)), d.Count, d.Limit)
	if d.Why == "errors" {
		what = fmt.Sprintf("%d calls in a row failed with %s (error_limit %d), the last %s %s", d.Count, d.ErrorCode, d.Limit, d.Tool, textbound.Quote(string(d.Arguments)))
	}
	return fmt.Sprintf("%s in turns %d to %d; %d input and %d output tokens since", what, d.FirstTurn, d.LastTurn, d.InputTokens, d.OutputTokens)
}

// printWaits shows a run's open waits: each one's id, kind and node, what
// the decider is shown, since when and until when, and for a decision the
// commands that decide it.
func printWaits(w io.Writer, runID string, ws []apitypes.HumanWait) {
	for _, hw := range ws {
		fmt.Fprintf(w, "wait:     %s (%s) at node %s", hw.ID, hw.Kind, hw.Node)
		if hw.RunID != runID {
			fmt.Fprintf(w, " of run %s", hw.RunID)
		}
		if !hw.Since.IsZero() {
			fmt.Fprintf(w, ", since %s", hw.Since.UTC().Format(time.RFC3339))
		}
		if time.Until(hw.Until) > 50*365*24*time.Hour {
			fmt.Fprint(w, ", no timeout")
		} else {
			fmt.Fprintf(w, ", until %s", hw.Until.UTC().Format(time.RFC3339))
		}
		fmt.Fprintln(w)
		if len(hw.Shown) > 0 {
			fmt.Fprintf(w, "  shown:   %s\n", hw.Shown)
		}
		if d := hw.Digest; d != "" {
			fmt.Fprintf(w, "  digest:  %s\n", d)
		}
		if d := runawayDiagnosis(hw); d != "" {
			fmt.Fprintf(w, "  runaway: %s\n", d)
		}
		if a, r := decideCommands(hw, ws); a != "" {
			fmt.Fprintf(w, "  approve: %s\n  reject:  %s\n", a, r)
		}
		if hw.Kind == apitypes.WaitRunaway {
			fmt.Fprintf(w, "  cancel:  weir run cancel %s\n", hw.RunID)
		}
		if c := budgetCommand(hw); c != "" {
			fmt.Fprintf(w, "  budget:  %s\n", c)
		}
		if ed, rs := callCommands(hw, ws); ed != "" {
			fmt.Fprintf(w, "  edit:    %s\n  respond: %s\n", ed, rs)
		}
		if c := redriveCommand(hw); c != "" {
			fmt.Fprintf(w, "  redrive: %s\n", c)
		}
		if c := resolveCommand(hw); c != "" {
			fmt.Fprintf(w, "  resolve: %s\n", c)
		}
	}
}
