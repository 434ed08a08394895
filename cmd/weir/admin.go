package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/weirhq/weir/runtime/api"
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
				var res api.ReloadResult
				if err := m.client().do(cmd.Context(), "POST", "/admin/reload", nil, &res); err != nil {
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
		cmd.AddCommand(reload)
		return cmd
	})
}
