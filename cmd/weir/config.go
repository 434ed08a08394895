package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/weirhq/weir/runtime/config"
	"github.com/weirhq/weir/runtime/host"
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
token files, and each plugin section against the config schema its
installed plugin declares (unknown keys, wrong types). Every problem is printed with its file:line (exit 1);
a token file, or a config file holding a secret, that others may read is
valid but warned of on stderr, as the daemon warns at start. With
--json, print the config in force that the file gives, defaults filled in
and token secrets left out.`,
			Args: exactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := config.Load(args[0])
				if err == nil {
					err = checkPluginSections(m.PluginsDir, c)
				}
				if err != nil {
					return &exitError{code: exitFailed, err: err}
				}
				for _, w := range c.Warnings {
					fmt.Fprintf(m.Stderr, "warning: %s\n", w)
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

// checkPluginSections checks c's plugin sections against the config
// schemas of the plugins installed in pluginsDir, each problem with its
// file:line, as a *config.Error.
func checkPluginSections(pluginsDir string, c *config.Config) error {
	if len(c.Plugins) == 0 {
		return nil
	}
	probs, err := host.CheckPluginConfig(pluginsDir, c.Plugins)
	if err != nil {
		return &config.Error{Problems: []string{err.Error()}}
	}
	if len(probs) == 0 {
		return nil
	}
	e := &config.Error{}
	for _, p := range probs {
		where := c.PluginWhere(p.Plugin, p.Key)
		if where != "" {
			where += ": "
		}
		e.Problems = append(e.Problems, fmt.Sprintf("%splugin %q: %s", where, p.Plugin, p.Message))
	}
	return e
}

// optionalConfig is loadChecked for a --config flag that may be left
// out: nil when path is "", and a config that fails to load or check
// exits failed.
func optionalConfig(m *Main, path string) (*config.Config, error) {
	if path == "" {
		return nil, nil
	}
	c, err := loadChecked(m, path)
	if err != nil {
		return nil, &exitError{code: exitFailed, err: err}
	}
	return c, nil
}

// loadChecked loads the config file at path and checks its plugin
// sections against the installed plugins' schemas.
func loadChecked(m *Main, path string) (*config.Config, error) {
	c, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	if err := checkPluginSections(m.PluginsDir, c); err != nil {
		return nil, err
	}
	return c, nil
}
