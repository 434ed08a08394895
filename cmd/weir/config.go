package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/weirhq/weir/runtime/config"
)

func init() {
	registerCommand(func(m *Main) *cobra.Command {
		cmd := &cobra.Command{Use: "config", Short: "Check the daemon's config file"}
		var asJSON bool
		check := &cobra.Command{
			Use:   "check FILE",
			Short: "Validate a config file as 'weir serve --config' would",
			Long: `Validate a config file as 'weir serve --config' and a reload would: unknown
blocks and attributes, values and their ranges, the socket's group, the
token files. Every problem is printed with its file:line (exit 1). With
--json, print the config in force that the file gives, defaults filled in
and token secrets left out.`,
			Args: exactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := config.Load(args[0])
				if err != nil {
					return &exitError{code: exitFailed, err: err}
				}
				if asJSON {
					return printJSON(m.Stdout, c)
				}
				fmt.Fprintf(m.Stdout, "%s: valid\n", args[0])
				return nil
			},
		}
		check.Flags().BoolVar(&asJSON, "json", false, "print the resolved config as JSON")
		cmd.AddCommand(check)
		return cmd
	})
}
