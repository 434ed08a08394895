package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/render"
	rtdaemon "github.com/weirhq/weir/runtime/daemon"
)

// graphFormat validates --format before anything is asked of the daemon.
func graphFormat(f string) error {
	if f != render.FormatMermaid && f != render.FormatDot && f != render.FormatSVG {
		return usageErrorf("--format %q: use mermaid, dot or svg", f)
	}
	return nil
}

// graphFormatFlag is a graph command's --format.
func graphFormatFlag(cmd *cobra.Command, format *string) {
	cmd.Flags().StringVar(format, "format", render.FormatMermaid, "mermaid, dot or svg")
}

// printGraph prints the graph the daemon drew, or why it did not.
func (m *Main) printGraph(out string, err error) error {
	if err != nil {
		return m.apiFailure(err)
	}
	fmt.Fprint(m.Stdout, out)
	return nil
}

func flowGraphCommand(m *Main) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "graph NAME|FILE.star|FILE.lua",
		Short: "Draw a flow as Mermaid, Graphviz dot or SVG",
		Long: `Draw the latest registered version of the flow NAME (asking the daemon), or
every flow a FILE.star declares (offline, no daemon needed). Ok wires are
solid, error wires dashed.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := graphFormat(format); err != nil {
				return err
			}
			if strings.HasSuffix(args[0], ".star") || strings.HasSuffix(args[0], ".lua") {
				src, err := os.ReadFile(args[0])
				if err != nil {
					return usageErrorf("%v", err)
				}
				pool, err := rtdaemon.NewSandbox(nil) // the script runs, so under the sandbox's limits
				if err != nil {
					return err
				}
				defer pool.Close()
				mod, ds, err := pool.Analyze(cmd.Context(), flows.AnalyzeRequest{Files: []flows.File{{Path: args[0], Src: src}}})
				if err != nil {
					return &exitError{code: exitFailed, err: err}
				}
				if len(ds) > 0 {
					_ = ds.WriteText(m.Stdout)
					return exitCode(exitFailed)
				}
				for _, f := range mod.Flows {
					out, err := render.Render(f, format, nil)
					if err != nil {
						return &exitError{code: exitFailed, err: err}
					}
					fmt.Fprint(m.Stdout, out)
				}
				return nil
			}
			return m.printGraph(m.api().FlowGraph(cmd.Context(), args[0], format))
		},
	}
	graphFormatFlag(cmd, &format)
	return cmd
}

func (m *Main) runGraphCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "graph RUN",
		Short: "Draw the run's flow coloured by what the run did (visited, current, waiting, failed, cancelled)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := graphFormat(format); err != nil {
				return err
			}
			return m.printGraph(m.api().RunGraph(cmd.Context(), args[0], format))
		},
	}
	graphFormatFlag(cmd, &format)
	return cmd
}
