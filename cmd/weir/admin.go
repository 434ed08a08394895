package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

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
		audit := &cobra.Command{
			Use:   "audit",
			Short: "List refused attempts on other owners' runs (the audit stream)",
			Long: `List the audit stream: every read, cancel or event query of a run by someone
who does not own it was answered like a missing run and recorded here, with
the caller, the action and the run. Only the OS user running the daemon may
read it, on the Unix socket.`,
			Args: exactArgs(0),
			RunE: func(cmd *cobra.Command, args []string) error {
				evs, err := m.api().AdminAudit(cmd.Context(), client.EventListParams{After: after})
				if err != nil {
					return m.apiFailure(err)
				}
				if auditJSON {
					return printJSON(m.Stdout, evs)
				}
				for _, e := range evs {
					fmt.Fprintf(m.Stdout, "%d  %s  %s  %v %v of run %v\n", e.Seq, e.At.UTC().Format(time.RFC3339), e.Type, e.Detail["caller"], e.Detail["action"], e.Detail["run"])
				}
				return nil
			},
		}
		audit.Flags().BoolVar(&auditJSON, "json", false, "print JSON")
		audit.Flags().Uint64Var(&after, "after", 0, "only events after this sequence number")
		cmd.AddCommand(reload, audit)
		return cmd
	})
}
