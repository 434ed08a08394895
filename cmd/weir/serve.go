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
		var configFile string
		flags := config.Default() // what serve's flags hold
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
				pins, err := flagPins(cmd.Flags(), flags)
				if err != nil {
					return err
				}
				return m.serve(cmd.Context(), configFile, flags.Store.URL, flags.Store.Shared, pins)
			},
		}
		f := cmd.Flags()
		f.StringVar(&configFile, "config", "", "HCL config file of the daemon (flags given beat it)")
		addKnobFlags(f, flags)
		return cmd
	})
}

// addKnobFlags registers a flag for every knob that has one, holding its
// value in flags (whose values are the defaults).
func addKnobFlags(f *pflag.FlagSet, flags *config.Config) {
	for _, k := range config.Knobs {
		if k.Flag == "" {
			continue
		}
		usage := k.Doc
		if k.Env != "" {
			usage += fmt.Sprintf(" (env %s, else the config file's %s)", k.Env, k.HCL)
		}
		switch p := k.Field(flags).(type) {
		case *int:
			f.IntVar(p, k.Flag, *p, usage)
		case *int64:
			f.Int64Var(p, k.Flag, *p, usage)
		case *time.Duration:
			f.DurationVar(p, k.Flag, *p, usage)
		case *string:
			f.StringVar(p, k.Flag, *p, usage)
		case *bool:
			f.BoolVar(p, k.Flag, *p, usage)
		default:
			panic(fmt.Sprintf("serve: knob %s: no flag for a %T", k.HCL, p))
		}
	}
}

// pin is a setting a command-line flag holds whatever the file says.
type pin struct {
	knob  *config.Knob
	flags *config.Config // the flag's value
}

// flagPins returns the settings the flags given on the command line hold.
// A knob with an environment variable is not pinned: the flag beats the
// variable, which beats the file (storeURL, storeShared).
func flagPins(f *pflag.FlagSet, flags *config.Config) ([]pin, error) {
	var out []pin
	for _, k := range config.Knobs {
		if k.Flag == "" || !f.Changed(k.Flag) {
			continue
		}
		if p := k.Check(flags); p != "" {
			return nil, usageErrorf("--%s %s", k.Flag, p)
		}
		if k.Env == "" {
			out = append(out, pin{knob: k, flags: flags})
		}
	}
	return out, nil
}

// applyPins sets the pinned settings in c and says which values of the
// file they override.
func applyPins(c *config.Config, pins []pin) (names, notes []string) {
	for _, p := range pins {
		before := p.knob.String(c)
		p.knob.Copy(c, p.flags)
		names = append(names, p.knob.Flag)
		if after := p.knob.String(c); c.File != "" && before != after {
			notes = append(notes, fmt.Sprintf("--%s pins %s; the file's %s is not used", p.knob.Flag, after, before))
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
	log := m.newLogger("weir", cfg.LogLevel, cfg.LogFormat)
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
