package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/script"
	"github.com/weirhq/weir/internal/textbound"
	"github.com/weirhq/weir/runtime/api"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/config"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/store"
)

func init() {
	registerCommand(func(m *Main) *cobra.Command {
		var opts execOptions
		var input string
		cmd := &cobra.Command{
			Use:   "exec FILE.star|FILE.lua [MORE.star|MORE.lua...]",
			Short: "Register flow files and run one flow to its end, without a daemon",
			Long: `Register the flow files together and run one of their flows to the end on the
store in the data directory (or the PostgreSQL store of --store or
WEIR_STORE), without a daemon, then print the result. Files are Starlark
(.star) or Lua (.lua), mixed as needed. Give every file the flow needs: the
files of the subflows it calls and the files it load()s. --flow picks the
flow (default: the first one the first file declares; when it declares
several, exec says which it runs, and refuses, with the flows that fit,
an input the first one's schema does not take). Refused
clearly if a daemon holds the data directory: use 'weir flow register' and
'weir run start' then.
With --config FILE, plugins are launched with that file's plugin blocks
(their sections, env and memory_max), as 'weir serve --config' would.`,
			Args: minArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				in, err := readInput(input)
				if err != nil {
					return err
				}
				opts.files, opts.input = args, in
				return m.exec(cmd.Context(), opts)
			},
		}
		cmd.Flags().StringVar(&opts.flow, "flow", "", "flow to run (default: the first one the file declares)")
		cmd.Flags().StringVar(&input, "input", "", "run input as JSON, or @file")
		cmd.Flags().BoolVar(&opts.asJSON, "json", false, "print the final run as JSON")
		cmd.Flags().StringVar(&opts.logLevel, "log-level", "warn", "trace, debug, info, warn or error")
		cmd.Flags().StringVar(&opts.config, "config", "", "launch plugins with the plugin blocks of this daemon config file (models of the llm plugin, say), and use its store")
		cmd.Flags().StringVar(&opts.store, "store", "", "PostgreSQL URL of the store (env WEIR_STORE, else --config's store block, else the embedded store in the data directory)")
		return cmd
	})
}

// execOptions is what one weir exec command line asks for.
type execOptions struct {
	files    []string // the flow scripts to register together
	flow     string   // the flow to run; "" runs the first the first file declares
	input    json.RawMessage
	asJSON   bool // print the final run as JSON
	logLevel string
	config   string // the daemon config file whose plugin blocks apply ("": none)
	store    string // --store: the PostgreSQL URL of the store ("": WEIR_STORE, the config's, the embedded)
}

func (m *Main) exec(ctx context.Context, opts execOptions) error {
	read, err := readFlowFiles(opts.files)
	if err != nil {
		return err
	}
	// Which flow runs is decided before the store is opened: a refusal
	// registers nothing.
	flowName, which, err := pickExecFlow(read, opts)
	if err != nil {
		return err
	}
	files := make([]engine.SourceFile, len(read))
	for i, f := range read {
		files[i] = engine.SourceFile{Path: f.Path, Src: string(f.Src)}
	}
	plugins, err := optionalConfig(m, opts.config)
	if err != nil {
		return err
	}
	storeURL, note, err := m.storeURL(opts.store, plugins)
	if err != nil {
		return err
	}
	log := m.newLogger("weir", opts.logLevel, config.DefaultLogFormat)
	if note != "" {
		log.Warn(note)
	}
	shared, err := m.storeShared(false, storeURL, plugins)
	if err != nil {
		return err
	}
	s, err := m.openEmbedded(ctx, log, plugins, storeURL, shared)
	if err != nil {
		return err
	}
	defer s.Close(context.Background())

	// Registered as the user running exec, as the daemon would: the
	// flow names it declares are that user's (or refused if another
	// user registered them first).
	owner := currentUser()
	res, err := s.Engine.RegisterAs(ctx, owner, files)
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	for _, d := range res.Diagnostics { // warnings too: they run anyway
		fmt.Fprintln(m.Stderr, d.String())
	}
	if len(res.Diagnostics.Errors()) > 0 {
		if res.Diagnostics.Has(flows.CodeUnknownFlow) || res.Diagnostics.Has(flows.CodeLoad) {
			fmt.Fprintln(m.Stderr, "weir: give exec every file the flow needs: the files of the subflows it calls and the files it load()s")
		}
		return exitCode(exitFailed)
	}
	if flowName == "" {
		return fmt.Errorf("%s declares no flow", opts.files[0])
	}
	if which != "" {
		fmt.Fprintln(m.Stderr, which)
	}
	started, err := s.Engine.Submit(ctx, engine.StartRequest{Owner: owner, Flow: flowName, Input: opts.input})
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	fmt.Fprintf(m.Stderr, "run %s of %s\n", started.RunID, flowName)
	live := newLiveLine(m.Stderr)
	defer live.done()
	for {
		run, err := s.Engine.Get(ctx, owner, started.RunID)
		if err != nil {
			return err
		}
		p, _ := s.Engine.Progress(ctx, run)
		if !opts.asJSON {
			live.show(progressLine(api.ViewOf(run, p)))
		}
		if run.Phase.Terminal() {
			live.done()
			return m.printFinal(api.ViewOf(run, p), opts.asJSON)
		}
		if run.Phase == store.PhaseWaiting {
			waits, err := s.Engine.HumanWaits(ctx, owner, run.ID)
			if err != nil {
				return err
			}
			if len(waits) > 0 {
				// A person must decide; exec does not hold the store for days.
				fmt.Fprintf(m.Stdout, "%s waiting\n", run.ID)
				shown := make([]apitypes.HumanWait, len(waits))
				for i, w := range waits {
					shown[i] = apitypes.HumanWait{ID: w.ID, Kind: w.Kind, RunID: w.RunID, Flow: w.Flow, Node: w.Node,
						Since: w.Since, Until: w.Until, Shown: w.Shown, Digest: w.Digest()}
				}
				printWaits(m.Stdout, run.ID, shown)
				fmt.Fprintf(m.Stdout, "the run is saved in %s; start the daemon there (weir serve) to decide and let it go on\n", m.DataDir)
				return exitCode(exitWaiting)
			}
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(m.Stderr, "interrupted; run %s stays in the store and resumes on the next start\n", run.ID)
			return exitCode(exitFailed)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// pickExecFlow is the flow exec runs: --flow's, else the first one the
// first file declares ("" if it declares none: registration then says
// why), with a note to print when the file declares others. When the
// first flow is a helper whose input schema the input does not fit, the
// start is refused with E_BAD_INPUT and the flows of the file that do fit
// it, rather than run with an input it was never meant for.
func pickExecFlow(files []flows.File, opts execOptions) (name, note string, err error) {
	if opts.flow != "" {
		return opts.flow, "", nil
	}
	path := opts.files[0]
	declared := flowsDeclaredIn(files, path)
	switch len(declared) {
	case 0:
		return "", "", nil
	case 1:
		return declared[0].Name, "", nil
	}
	var all textbound.List
	for _, f := range declared {
		all.Add(f.Name)
	}
	first := declared[0]
	var input any
	if len(opts.input) > 0 {
		if err := json.Unmarshal(opts.input, &input); err != nil {
			return "", "", &exitError{code: exitUsage, err: fmt.Errorf("--input is not valid JSON: %v", err)}
		}
	}
	bad := first.ValidateInput(input)
	if bad == nil {
		return first.Name, fmt.Sprintf("weir: %s declares %d flows (%s): running %s, the first; --flow NAME runs another",
			path, all.Len(), all.Join(", "), first.Name), nil
	}
	var fit textbound.List
	for _, f := range declared[1:] {
		if f.ValidateInput(input) == nil {
			fit.Add("--flow " + f.Name)
		}
	}
	hint := fmt.Sprintf("pick one with --flow NAME (flows in %s: %s)", path, all.Join(", "))
	if fit.Len() > 0 {
		hint = fmt.Sprintf("did you mean %s? (flows in %s: %s)", fit.Join(" or "), path, all.Join(", "))
	}
	return "", "", &exitError{code: exitFailed, err: fmt.Errorf("%s: %s declares %d flows and the first, %s, does not take this input (%s); %s",
		engine.CodeBadInput, path, all.Len(), first.Name, textbound.Quote(bad.Error()), hint)}
}

// flowsDeclaredIn lists the flows the file at path declares, in the order
// it declares them, among files loaded together.
func flowsDeclaredIn(files []flows.File, path string) []*flows.Flow {
	mod, _ := script.Check(files, flows.MapCatalog{})
	var out []*flows.Flow
	for _, f := range mod.Flows {
		if f.Pos.File == path {
			out = append(out, f)
		}
	}
	return out
}

// currentUser is the OS user running the command: the owner of runs that
// exec starts, as the daemon would derive it from the socket's peer.
func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return fmt.Sprintf("uid:%d", os.Getuid())
}
