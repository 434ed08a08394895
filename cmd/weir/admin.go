package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

func init() {
	registerCommand(func(m *Main) *cobra.Command {
		cmd := &cobra.Command{Use: "admin", Short: "Operate the daemon (its own OS user only)"}
		var asJSON bool
		reload := &cobra.Command{
			Use:   "reload",
			Short: "Re-read the daemon's config file, validate it and swap it in",
			Long: `Ask the daemon to re-read its --config file, as SIGHUP does. The candidate is
validated first: if it is invalid, or changes a setting that only a restart
applies (the TCP or metrics address, a plugin's section), the config in force
stays as it was and the answer says why (exit 1). Lowering limits only limits
new starts; no work in hand is stopped. Only the OS user running the daemon
may reload, on the Unix socket.`,
			Args: exactArgs(0),
			RunE: func(cmd *cobra.Command, args []string) error {
				res, err := m.api().AdminReload(cmd.Context())
				if err != nil {
					return m.apiFailure(err)
				}
				if asJSON {
					return printJSON(m.Stdout, res)
				}
				if res.Changed {
					fmt.Fprintf(m.Stdout, "reloaded %s: config version %d (was %d)\n", res.Config.File, res.Config.Version, res.Previous)
				} else {
					fmt.Fprintf(m.Stdout, "unchanged: %s is the config in force, version %d\n", res.Config.File, res.Config.Version)
				}
				for _, n := range res.Notes {
					fmt.Fprintln(m.Stdout, "note:", n)
				}
				return nil
			},
		}
		reload.Flags().BoolVar(&asJSON, "json", false, "print JSON")
		var auditJSON bool
		var after uint64
		var limit int
		audit := &cobra.Command{
			Use:   "audit",
			Short: "List refused attempts on other owners' runs and flows (the audit stream)",
			Long: `List the audit stream: every read, cancel, decision or event query of a run
by someone who does not own it was answered like a missing run and recorded
here, with the caller, the action and the run; so was every registration of
a flow name another owner registered first. Only the OS user running the
daemon may read it, on the Unix socket.

The stream is bounded: each caller records at most a burst of events and then
one every few seconds (the events beyond are counted in the caller's next
event as "suppressed"); past that, an access to a run that exists is still
recorded, a few per run and then one a minute (made-up ids are the flood,
real runs of others are not); long ids are cut, and events older than the retention
are pruned. It is read a page at a time, oldest first: --limit events after
--after; a full page ends with the command that reads the next one.`,
			Args: exactArgs(0),
			RunE: func(cmd *cobra.Command, args []string) error {
				if limit < 1 || limit > apitypes.MaxEventLimit {
					return usageErrorf("--limit must be from 1 to %d", apitypes.MaxEventLimit)
				}
				evs, err := m.api().AdminAudit(cmd.Context(), client.EventListParams{After: after, Limit: limit})
				if err != nil {
					return m.apiFailure(err)
				}
				if auditJSON {
					return printJSON(m.Stdout, evs)
				}
				if len(evs) == 0 {
					if after > 0 {
						fmt.Fprintf(m.Stdout, "none after %d\n", after)
					} else {
						fmt.Fprintln(m.Stdout, "none")
					}
					return nil
				}
				for _, e := range evs {
					fmt.Fprintf(m.Stdout, "%d  %s  %s  %s\n", e.Seq, e.At.UTC().Format(time.RFC3339), e.Type, auditLine(e.Detail))
				}
				if len(evs) == limit {
					fmt.Fprintf(m.Stdout, "more: weir admin audit --after %d --limit %d\n", evs[len(evs)-1].Seq, limit)
				}
				return nil
			},
		}
		audit.Flags().BoolVar(&auditJSON, "json", false, "print JSON")
		audit.Flags().Uint64Var(&after, "after", 0, "only events after this sequence number")
		audit.Flags().IntVar(&limit, "limit", 100, "at most this many events")
		cmd.AddCommand(reload, audit)
		return cmd
	})
}

// auditLine says what an audit event records: "CALLER ACTION of run ID"
// (or "of flow NAME"), and how many of the caller's refusals before it
// were only counted.
func auditLine(d map[string]any) string {
	what := "run"
	if _, ok := d["flow"]; ok {
		what = "flow"
	}
	line := fmt.Sprintf("%v %v of %s %v", d["caller"], d["action"], what, d[what])
	if n, ok := d["suppressed"]; ok {
		line += fmt.Sprintf(" (and %v earlier refusals of this caller not recorded)", n)
	}
	if d["over_caller_limit"] == true {
		line += " (past the caller's limit: recorded as an access to an existing run)"
	}
	if n, ok := d["suppressed_on_run"]; ok {
		line += fmt.Sprintf(" (and %v earlier refusals on this run not recorded)", n)
	}
	return line
}
