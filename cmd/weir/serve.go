package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/weirhq/weir/runtime/config"
	rtdaemon "github.com/weirhq/weir/runtime/daemon" // package main has its own daemon (the test harness)
	"github.com/weirhq/weir/runtime/store"
)

func init() {
	registerCommand(func(m *Main) *cobra.Command {
		var configFile, storeFlag string
		var sharedFlag bool
		var fv flagValues
		cmd := &cobra.Command{
			Use:   "serve",
			Short: "Run the weir daemon: the engine, recovery, and the API on the socket",
			Long: `Run the weir daemon: recover the store, start the engine and serve the API
on the Unix socket (and on TCP and a metrics address if the config file says
so) until SIGINT or SIGTERM, then drain for the grace period.

--config FILE reads the daemon's settings from an HCL file (see
docs/operators.md). A flag given on the command line beats the file, at
start and on every reload, for the life of the process. SIGHUP or
'weir admin reload' re-reads the file; an invalid file changes nothing.`,
			Args: exactArgs(0),
			RunE: func(cmd *cobra.Command, args []string) error {
				pins, err := fv.pins(cmd.Flags())
				if err != nil {
					return err
				}
				return m.serve(cmd.Context(), configFile, storeFlag, sharedFlag, pins)
			},
		}
		f := cmd.Flags()
		f.StringVar(&configFile, "config", "", "HCL config file of the daemon (flags given beat it)")
		f.StringVar(&storeFlag, "store", "", "PostgreSQL URL of the store (env WEIR_STORE, else the config file's store block, else the embedded store in the data directory)")
		f.BoolVar(&sharedFlag, "shared", false, "share the PostgreSQL store with other daemons, a fleet (env WEIR_STORE_SHARED, else the config file's store block)")
		f.IntVar(&fv.workers, "workers", config.DefaultWorkers, "worker slots")
		f.IntVar(&fv.maxQueued, "max-queued", config.DefaultMaxQueued, "runs accepted but not started before new ones are refused")
		f.DurationVar(&fv.queueTimeout, "queue-timeout", config.DefaultQueueTimeout, "how long a task may wait for a slot before it is dropped")
		f.Int64Var(&fv.budgetInFlight, "budget-in-flight", 0, "cost units running tasks may hold at once (0: unlimited)")
		f.Int64Var(&fv.runBudget, "run-budget", 0, "budget of runs whose flow declares none (0: unlimited)")
		f.DurationVar(&fv.leaseTimeout, "lease-timeout", config.DefaultLeaseTimeout, "lease deadline; holders renew at a third of it")
		f.DurationVar(&fv.grace, "grace", config.DefaultDrainGrace, "how long held work may drain on stop before it is cancelled")
		f.StringVar(&fv.logLevel, "log-level", config.DefaultLogLevel, "trace, debug, info, warn or error")
		return cmd
	})
}

// flagValues are serve's flags that mirror settings of the config file.
type flagValues struct {
	workers, maxQueued                int
	queueTimeout, leaseTimeout, grace time.Duration
	budgetInFlight, runBudget         int64
	logLevel                          string
}

// pin is a setting a command-line flag holds whatever the file says.
type pin struct {
	flag string
	get  func(*config.Config) string
	set  func(*config.Config)
}

// pins returns the settings the flags given on the command line hold.
func (fv *flagValues) pins(f *pflag.FlagSet) ([]pin, error) {
	all := []pin{
		{"workers", func(c *config.Config) string { return fmt.Sprint(c.Engine.Workers) }, func(c *config.Config) { c.Engine.Workers = fv.workers }},
		{"max-queued", func(c *config.Config) string { return fmt.Sprint(c.Engine.MaxQueued) }, func(c *config.Config) { c.Engine.MaxQueued = fv.maxQueued }},
		{"queue-timeout", func(c *config.Config) string { return c.Engine.QueueTimeout.String() }, func(c *config.Config) { c.Engine.QueueTimeout = fv.queueTimeout }},
		{"budget-in-flight", func(c *config.Config) string { return fmt.Sprint(c.Engine.BudgetInFlight) }, func(c *config.Config) { c.Engine.BudgetInFlight = fv.budgetInFlight }},
		{"run-budget", func(c *config.Config) string { return fmt.Sprint(c.Engine.RunBudget) }, func(c *config.Config) { c.Engine.RunBudget = fv.runBudget }},
		{"lease-timeout", func(c *config.Config) string { return c.Engine.LeaseTimeout.String() }, func(c *config.Config) { c.Engine.LeaseTimeout = fv.leaseTimeout }},
		{"grace", func(c *config.Config) string { return c.DrainGrace.String() }, func(c *config.Config) { c.DrainGrace = fv.grace }},
		{"log-level", func(c *config.Config) string { return c.LogLevel }, func(c *config.Config) { c.LogLevel = fv.logLevel }},
	}
	switch {
	case f.Changed("workers") && fv.workers < 1:
		return nil, usageErrorf("--workers must be at least 1")
	case f.Changed("max-queued") && fv.maxQueued < 1:
		return nil, usageErrorf("--max-queued must be at least 1")
	case f.Changed("lease-timeout") && fv.leaseTimeout <= 0:
		return nil, usageErrorf("--lease-timeout must be positive")
	case f.Changed("grace") && fv.grace < 0:
		return nil, usageErrorf("--grace must not be negative")
	case f.Changed("budget-in-flight") && fv.budgetInFlight < 0, f.Changed("run-budget") && fv.runBudget < 0:
		return nil, usageErrorf("budgets must not be negative")
	case f.Changed("log-level") && !validLogLevel(fv.logLevel):
		return nil, usageErrorf("--log-level must be trace, debug, info, warn or error, not %q", fv.logLevel)
	}
	var out []pin
	for _, p := range all {
		if f.Changed(p.flag) {
			out = append(out, p)
		}
	}
	return out, nil
}

func validLogLevel(s string) bool {
	switch s {
	case "trace", "debug", "info", "warn", "error":
		return true
	}
	return false
}

// applyPins sets the pinned settings in c and says which values of the
// file they override.
func applyPins(c *config.Config, pins []pin) (names, notes []string) {
	for _, p := range pins {
		before := p.get(c)
		p.set(c)
		names = append(names, p.flag)
		if after := p.get(c); c.File != "" && before != after {
			notes = append(notes, fmt.Sprintf("--%s pins %s; the file's %s is not used", p.flag, after, before))
		}
	}
	return names, notes
}

// configSource reads serve's config: the file (or the defaults) with what
// the command line pins applied, at start and on every reload.
type configSource struct {
	file       string // "" when started on flags alone
	pluginsDir string // where plugin sections are checked against their schemas
	pins       []pin
}

// load reads the config file (or the defaults) with the pins applied.
func (c *configSource) load() (*config.Config, []string, []string, error) {
	cfg := config.Default()
	if c.file != "" {
		var err error
		if cfg, err = config.Load(c.file); err != nil {
			return nil, nil, nil, err
		}
		if err := checkPluginSections(c.pluginsDir, cfg); err != nil {
			return nil, nil, nil, err
		}
	}
	names, notes := applyPins(cfg, c.pins)
	return cfg, names, append(cfg.Warnings, notes...), nil
}

// serve runs the daemon until ctx ends (SIGINT/SIGTERM), then drains.
func (m *Main) serve(ctx context.Context, file, storeFlag string, sharedFlag bool, pins []pin) error {
	if file != "" {
		abs, err := filepath.Abs(file) // a reload finds it whatever the working directory
		if err != nil {
			return usageErrorf("--config: %v", err)
		}
		file = abs
	}
	src := &configSource{file: file, pluginsDir: m.PluginsDir, pins: pins}
	cfg, pinned, notes, err := src.load()
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	log := m.newLogger("weir", cfg.LogLevel)
	for _, n := range notes {
		log.Warn(n)
	}
	storeURL, note, err := m.storeURL(storeFlag, cfg)
	if err != nil {
		return err
	}
	if note != "" {
		log.Warn(note)
	}
	shared, err := m.storeShared(sharedFlag, storeURL, cfg)
	if err != nil {
		return err
	}
	opts := rtdaemon.Options{DataDir: m.DataDir, PluginsDir: m.PluginsDir, SocketPath: m.SocketPath, StoreURL: storeURL, Shared: shared,
		Config: cfg, Pinned: pinned, Logger: log}
	if file != "" {
		opts.Load = src.load
	}
	d, err := rtdaemon.Open(ctx, opts)
	if err != nil {
		return m.diskFullHint(err)
	}
	err = d.Serve(ctx)
	if errors.Is(err, rtdaemon.ErrLockLost) {
		return &exitError{code: exitFailed, err: err}
	}
	return err
}

// diskFullHint says what to do when the store refused a write at start
// because its disk is full.
func (m *Main) diskFullHint(err error) error {
	if !errors.Is(err, store.ErrDiskFull) {
		return err
	}
	return fmt.Errorf("%w\nthe disk of the data directory %s has too little free space for the daemon to start: free some, or lower disk { min_free } (the store keeps half of it in reserve)", err, m.DataDir)
}
