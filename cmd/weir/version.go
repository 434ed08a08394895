package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func init() {
	registerCommand(func(m *Main) *cobra.Command {
		return &cobra.Command{
			Use:   "version",
			Short: "Print the version of weir",
			Args:  exactArgs(0),
			RunE: func(cmd *cobra.Command, args []string) error {
				fmt.Fprintf(m.Stdout, "weir %s\n", version)
				return nil
			},
		}
	})
}
