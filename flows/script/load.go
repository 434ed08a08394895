package script

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/script/front"
	"github.com/weirhq/weir/flows/script/luafront"
	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// DefaultMaxSteps is the step limit of one file's execution at load time
// and of one callable evaluation at run time, when the Loader sets none.
// Registering a flow of 10,000 nodes takes well under a tenth of it; an
// endless loop reaches it in a fraction of a second.
const DefaultMaxSteps = front.DefaultMaxSteps

// DefaultMaxFileBytes bounds one source file when the Loader sets no limit.
const DefaultMaxFileBytes = 4 << 20

// Loader loads flow scripts with explicit limits. The zero Loader uses the
// defaults; Load and NewEvaluator are shorthands for it.
type Loader struct {
	// MaxSteps bounds the Starlark steps of one file's execution (each
	// load()ed file gets its own allowance) and of one callable call.
	MaxSteps uint64
	// MaxFileBytes bounds the size of one source file.
	MaxFileBytes int
	// OnRun, if set, is called with a file's path before its script
	// runs: a sandbox tells which file it was in when a limit killed it.
	OnRun func(path string)
}

func (l Loader) maxSteps() uint64 {
	if l.MaxSteps == 0 {
		return DefaultMaxSteps
	}
	return l.MaxSteps
}

func (l Loader) maxFileBytes() int {
	if l.MaxFileBytes <= 0 {
		return DefaultMaxFileBytes
	}
	return l.MaxFileBytes
}

// Load runs the scripts in files together in the sandbox with the default
// limits and returns the flows they declare, checked on their own (see
// Loader.Load).
func Load(files []flows.File) (*flows.Module, flows.Diagnostics) { return Loader{}.Load(files) }

// Load runs the scripts in files together in the sandbox and returns the
// flows they declare. It reports every problem it can find without other
// flows or a tool catalog: syntax and script errors, bad loads, invalid
// arguments, duplicates, and each flow's graph problems (dangling wires,
// unreachable nodes, unbounded cycles). Check adds the rest.
//
// The module is returned even when there are diagnostics, with what could
// be loaded.
func (l Loader) Load(files []flows.File) (*flows.Module, flows.Diagnostics) {
	m, ds, _ := l.analyze(files, nil, nil, false)
	return m, ds
}

// loadState is the state of one load: every file of the set, what their
// scripts declared so far, and the diagnostics. It is reached from the
// builtins through the thread's locals.
type loadState struct {
	loader Loader
	mod    *flows.Module
	files  map[string]*fileState
	diags  flows.Diagnostics
	// incomplete is set when some file could not be run to its end, so
	// flows it would have declared are missing.
	incomplete bool
	// callables, when not nil, collects the values passed to builtins, by
	// reference (evaluator loads only).
	callables map[flows.CallableRef]callable
	// flowPos remembers where each flow name was first declared.
	flowPos map[string]flows.Pos
	// claimed are the node values that flows took as their nodes; their
	// Starlark values are dropped once the load is done, so that the IR
	// does not keep the scripts' heap alive.
	claimed []*nodeValue
	// declFile is the file whose execution declared each flow: the root
	// of the flow's sources, even when flow() ran in a loaded helper. A
	// schedule's or trigger's is under its Decl ("schedule:NAME"), which
	// no flow name can be.
	declFile map[string]string
	// declPos remembers where each schedule and trigger was first
	// declared, by Decl.
	declPos map[string]flows.Pos
	// constArgs are the nodes whose args is a constant, with its JSON
	// value, for the check against the tool's input schema.
	constArgs map[*flows.Node]any
}

type fileState struct {
	file       flows.File
	prog       *starlark.Program
	calls      map[lineCol]int32 // call parenthesis -> index in sites
	sites      []front.Site
	elems      []front.LineCol // elements of list literals passed as keyword arguments
	compileErr error
	loads      []string // resolved paths of this file's load()s
	wholeReads []resultRead
	state      execState
	globals    starlark.StringDict
	// other is set instead of prog for a file of another language.
	other front.Program
	// projs are the file's lambdas that only project their ctx, compiled
	// (projOf), by the position of their lambda keyword.
	projs map[lineCol]*flows.Proj
}

type execState int

const (
	notRun execState = iota
	running
	done
	failed
)

// lineCol is a call's parenthesis, where the interpreter reports it.
type lineCol = front.LineCol

func (fs *fileState) site(p syntax.Position) (*front.Site, bool) {
	i, ok := fs.calls[lineCol{Line: p.Line, Col: p.Col}]
	if !ok {
		return nil, false
	}
	return &fs.sites[i], true
}

// Thread-local keys.
const (
	localLoad = "weir.flows.load"
	localFile = "weir.flows.file"
	// localSite is the call site of a builtin called from another
	// language, which has no Starlark call stack.
	localSite = "weir.flows.site"
)

// errLoadFailed tells a loading file that the file it loads failed; the
// failure is already reported where it happened.
var errLoadFailed = errors.New("the loaded file has errors")

// loadCycleError is a load() chain that comes back to a file being loaded.
type loadCycleError struct{ chain []string }

func (e *loadCycleError) Error() string { return "load cycle " + flows.FormatChain(e.chain) }

var fileOptions = &syntax.FileOptions{
	// Top-level for and if let a script build its nodes in a loop, and
	// such loops rebind their variables; while and recursion stay off, so
	// that loops always iterate over something finite.
	TopLevelControl: true,
	GlobalReassign:  true,
}

func (l Loader) run(files []flows.File, collect bool) *loadState {
	ls := &loadState{
		loader:    l,
		mod:       &flows.Module{},
		files:     map[string]*fileState{},
		flowPos:   map[string]flows.Pos{},
		declFile:  map[string]string{},
		declPos:   map[string]flows.Pos{},
		constArgs: map[*flows.Node]any{},
	}
	if collect {
		ls.callables = map[flows.CallableRef]callable{}
	}
	var order []*fileState
	for i, f := range files {
		p := cleanPath(f.Path)
		if p == "" {
			ls.addf(flows.Pos{File: fmt.Sprintf("<file %d>", i+1)}, flows.CodeInvalid, nil, "a flow file needs a path")
			ls.incomplete = true
			continue
		}
		if _, dup := ls.files[p]; dup {
			ls.addf(flows.Pos{File: p}, flows.CodeDuplicate, nil, "file %s is given twice", p)
			continue
		}
		fs := &fileState{file: flows.File{Path: p, Src: f.Src}}
		ls.files[p] = fs
		ls.mod.Files = append(ls.mod.Files, fs.file)
		if len(f.Src) > l.maxFileBytes() {
			ls.addf(flows.Pos{File: p}, flows.CodeInvalid, nil, "file is %d bytes, more than the limit of %d", len(f.Src), l.maxFileBytes())
			fs.state = failed
			ls.incomplete = true
			continue
		}
		order = append(order, fs)
	}
	compileAll(order)
	for _, fs := range order { // every path is known now, for load()s
		ls.checkCompiled(fs)
	}
	for _, fs := range order {
		if fs.state == notRun {
			_ = ls.exec(fs)
		}
	}
	ls.computeSources()
	ls.computeDeclSources()
	for _, nv := range ls.claimed {
		nv.values = [numParams]starlark.Value{}
	}
	ls.diags = ls.diags.Sorted()
	return ls
}

func cleanPath(p string) string {
	if p == "" {
		return ""
	}
	return path.Clean(strings.ReplaceAll(p, "\\", "/"))
}

// compile parses, indexes and compiles one file. It touches nothing but
// fs, so the files of a set compile in parallel.
func (fs *fileState) compile() {
	if lang := languageOf(fs.file.Path); lang != nil {
		fs.other, fs.compileErr = lang.Compile(fs.file)
		return
	}
	f, err := fileOptions.Parse(fs.file.Path, fs.file.Src, 0)
	if err != nil {
		fs.compileErr = err
		return
	}
	fs.indexCalls(f)
	fs.wholeReads = wholeResultReads(f)
	prog, err := starlark.FileProgram(f, predeclared.Has)
	if err != nil {
		fs.compileErr = err
		return
	}
	fs.prog = prog
}

// compileAll compiles files on up to GOMAXPROCS goroutines: parsing is most
// of the cost of registering many files at once.
func compileAll(files []*fileState) {
	workers := min(runtime.GOMAXPROCS(0), len(files))
	if workers < 2 {
		for _, fs := range files {
			fs.compile()
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(files) {
					return
				}
				files[i].compile()
			}
		})
	}
	wg.Wait()
}

// checkCompiled reports a file's compile errors and checks its load()s
// statically, so that every bad load is reported, not only the first one
// executed.
func (ls *loadState) checkCompiled(fs *fileState) {
	if fs.compileErr != nil {
		ls.syntaxError(fs.compileErr, fs.file.Path)
		fs.state = failed
		ls.incomplete = true
		return
	}
	prog := fs.prog
	if prog == nil { // another language: no load()
		return
	}
	for i := range prog.NumLoads() {
		module, pos := prog.Load(i)
		target, ok := ls.resolveLoad(fs.file.Path, module)
		if !ok {
			ls.addf(toPos(pos), flows.CodeLoad, nil, "load(%q): %s is not among the flow files loaded together (%s)", module, target, ls.fileList())
			fs.state = failed
			ls.incomplete = true
			continue
		}
		if lang := languageOf(target); lang != nil {
			ls.addf(toPos(pos), flows.CodeLoad, nil, "load(%q): %s is a %s file; a Starlark flow calls a %s flow as a subflow, by name", module, target, lang.Name(), lang.Name())
			fs.state = failed
			ls.incomplete = true
			continue
		}
		fs.loads = append(fs.loads, target)
	}
}

func (ls *loadState) fileList() string {
	names := make([]string, 0, len(ls.files))
	for p := range ls.files {
		names = append(names, p)
	}
	slices.Sort(names)
	const most = 5
	if len(names) > most {
		return strings.Join(names[:most], ", ") + fmt.Sprintf(" and %d more", len(names)-most)
	}
	return strings.Join(names, ", ")
}

// resolveLoad finds a load()ed module among the files of the set: its
// name is a path relative to the loading file's directory.
func (ls *loadState) resolveLoad(from, module string) (string, bool) {
	target := module
	if !path.IsAbs(module) {
		target = path.Join(path.Dir(from), module)
	}
	target = cleanPath(target)
	_, ok := ls.files[target]
	return target, ok
}

func (ls *loadState) syntaxError(err error, file string) {
	var se syntax.Error
	var rl resolve.ErrorList
	var fse *front.SyntaxError
	switch {
	case errors.As(err, &fse):
		ls.addf(fse.Pos, flows.CodeSyntax, nil, "%s", fse.Msg)
	case errors.As(err, &rl):
		for _, e := range rl {
			ls.addf(toPos(e.Pos), flows.CodeSyntax, nil, "%s", e.Msg)
		}
	case errors.As(err, &se):
		ls.addf(toPos(se.Pos), flows.CodeSyntax, nil, "%s", se.Msg)
	default:
		ls.addf(flows.Pos{File: file}, flows.CodeSyntax, nil, "%v", err)
	}
}

// exec runs one file's script on its own thread with its own step
// allowance, running the files it loads first.
func (ls *loadState) exec(fs *fileState) error {
	switch fs.state {
	case done:
		return nil
	case failed:
		return errLoadFailed
	}
	if fs.other != nil {
		return ls.execOther(fs)
	}
	fs.state = running
	if ls.loader.OnRun != nil {
		ls.loader.OnRun(fs.file.Path)
	}
	thread := ls.newThread(fs)
	globals, err := fs.prog.Init(thread, predeclared)
	globals.Freeze()
	fs.globals = globals
	if err != nil {
		fs.state = failed
		ls.incomplete = true
		ls.execError(err, thread, fs)
		return errLoadFailed
	}
	fs.state = done
	return nil
}

func (ls *loadState) newThread(fs *fileState) *starlark.Thread {
	thread := &starlark.Thread{
		Name:  fs.file.Path,
		Print: func(*starlark.Thread, string) {}, // no output channel from a flow script
		Load: func(thread *starlark.Thread, module string) (starlark.StringDict, error) {
			target, ok := ls.resolveLoad(fs.file.Path, module)
			if !ok { // reported by compile; not reached
				return nil, fmt.Errorf("%s is not among the flow files loaded together", target)
			}
			dep := ls.files[target]
			if dep.state == running {
				return nil, &loadCycleError{chain: ls.loadChain(fs, dep)}
			}
			if err := ls.exec(dep); err != nil {
				return nil, err
			}
			return dep.globals, nil
		},
	}
	thread.SetMaxExecutionSteps(ls.loader.maxSteps())
	thread.SetLocal(localLoad, ls)
	thread.SetLocal(localFile, fs)
	front.SetStepLimit(thread, ls.loader.maxSteps())
	return thread
}

// loadChain names the files of a load cycle: from dep, through the files
// currently running, back to dep.
func (ls *loadState) loadChain(from, dep *fileState) []string {
	// The running files form a path dep -> ... -> from; walk it through
	// the resolved loads.
	chain := []string{dep.file.Path}
	cur := dep
	seen := map[*fileState]bool{dep: true}
	for cur != from {
		var next *fileState
		for _, p := range cur.loads {
			if c := ls.files[p]; c.state == running && !seen[c] {
				next = c
				break
			}
		}
		if next == nil {
			break
		}
		seen[next] = true
		chain = append(chain, next.file.Path)
		cur = next
	}
	return append(chain, dep.file.Path)
}

// execError turns a failed execution into a diagnostic at the innermost
// position inside the flow files.
func (ls *loadState) execError(err error, thread *starlark.Thread, fs *fileState) {
	if errors.Is(err, errLoadFailed) {
		return // the loaded file's own diagnostic says why
	}
	var cycle *loadCycleError
	var ee *starlark.EvalError
	pos := flows.Pos{File: fs.file.Path}
	if errors.As(err, &ee) {
		pos = ls.framePos(ee.CallStack, pos)
	}
	switch {
	case errors.As(err, &cycle):
		ls.addf(pos, flows.CodeLoad, cycle.chain, "load cycle %s", flows.FormatChain(cycle.chain))
	case thread.ExecutionSteps() >= ls.loader.maxSteps():
		ls.addf(pos, flows.CodeScriptLimit, nil, "script limit (steps): step limit exceeded: the script ran more than %d steps (an endless loop?)", ls.loader.maxSteps())
	case ee != nil && flows.LimitOf(err) != "":
		ls.addf(pos, flows.CodeScriptLimit, nil, "%s", ee.Msg)
	case ee != nil && strings.HasPrefix(ee.Msg, "load: "):
		// A load() whose module exists but lacks a name.
		ls.addf(pos, flows.CodeLoad, nil, "%s", ee.Msg)
	case ee != nil:
		ls.addf(pos, flows.CodeScript, nil, "%s", ee.Msg)
	default:
		ls.addf(pos, flows.CodeScript, nil, "%v", err)
	}
}

// framePos is the position of the innermost frame of stack that lies in a
// flow file, moved from a call's parenthesis to the call's start.
func (ls *loadState) framePos(stack starlark.CallStack, fallback flows.Pos) flows.Pos {
	for i := len(stack) - 1; i >= 0; i-- {
		p := stack[i].Pos
		fs, ok := ls.files[p.Filename()]
		if !ok {
			continue
		}
		if site, ok := fs.site(p); ok {
			return site.Start
		}
		return toPos(p)
	}
	return fallback
}

func toPos(p syntax.Position) flows.Pos {
	return flows.Pos{File: p.Filename(), Line: int(p.Line), Col: int(p.Col)}
}

// indexCalls records, for every call expression of a file, where it
// starts and where its keyword arguments are, keyed by the position of its
// parenthesis (the position the interpreter reports for a call). Sites and
// their keyword arguments live in two slices per file, not one allocation
// per call: a 10,000-node flow has tens of thousands of calls.
func (fs *fileState) indexCalls(f *syntax.File) {
	file := fs.file.Path
	// Every call has a '(' and every keyword argument an '=': counting
	// them sizes the slices once instead of growing them.
	calls := bytes.Count(fs.file.Src, []byte("("))
	fs.calls = make(map[lineCol]int32, calls)
	fs.sites = make([]front.Site, 0, calls)
	kws := make([]front.KwArg, 0, bytes.Count(fs.file.Src, []byte("=")))
	bounds := make([][2]int, 0, calls)
	syntax.Walk(f, func(n syntax.Node) bool {
		if l, ok := n.(*syntax.LambdaExpr); ok {
			if p := projOf(l); p != nil {
				if fs.projs == nil {
					fs.projs = map[lineCol]*flows.Proj{}
				}
				fs.projs[lineCol{Line: l.Lambda.Line, Col: l.Lambda.Col}] = p
			}
			return true
		}
		c, ok := n.(*syntax.CallExpr)
		if !ok {
			return true
		}
		start, _ := c.Fn.Span()
		lo := len(kws)
		for _, a := range c.Args {
			if b, ok := a.(*syntax.BinaryExpr); ok && b.Op == syntax.EQ {
				if id, ok := b.X.(*syntax.Ident); ok {
					kw := front.KwArg{Name: id.Name, Line: id.NamePos.Line, Col: id.NamePos.Col}
					if l, ok := b.Y.(*syntax.ListExpr); ok {
						kw.Lo = int32(len(fs.elems))
						for _, e := range l.List {
							p, _ := e.Span()
							fs.elems = append(fs.elems, front.LineCol{Line: p.Line, Col: p.Col})
						}
						kw.Hi = int32(len(fs.elems))
					}
					kws = append(kws, kw)
				}
			}
		}
		fs.calls[lineCol{Line: c.Lparen.Line, Col: c.Lparen.Col}] = int32(len(fs.sites))
		fs.sites = append(fs.sites, front.Site{Start: flows.Pos{File: file, Line: int(start.Line), Col: int(start.Col)}})
		bounds = append(bounds, [2]int{lo, len(kws)})
		return true
	})
	for i, b := range bounds {
		fs.sites[i].KW = kws[b[0]:b[1]:b[1]]
		fs.sites[i].Elems = &fs.elems
	}
}

// callerSite returns what is known about the builtin call being executed.
func (ls *loadState) callerSite(thread *starlark.Thread) *front.Site {
	if s, ok := thread.Local(localSite).(*front.Site); ok && s != nil {
		return s
	}
	if thread.CallStackDepth() < 2 { // called from Go, not from a script
		return &front.Site{}
	}
	p := thread.CallFrame(1).Pos
	if fs, ok := ls.files[p.Filename()]; ok {
		if site, ok := fs.site(p); ok {
			return site
		}
	}
	return &front.Site{Start: toPos(p)}
}

func (ls *loadState) addf(pos flows.Pos, code flows.Code, chain []string, format string, args ...any) {
	if ls.callables != nil && code != flows.CodeSyntax && code != flows.CodeScript && code != flows.CodeLoad {
		// An evaluator load only needs the callables; checks were made
		// when the flow was registered.
		return
	}
	msg := fmt.Sprintf(format, args...)
	if strings.ContainsAny(msg, "\r\n") {
		// Diagnostics print one per line.
		msg = strings.Join(strings.FieldsFunc(msg, func(r rune) bool { return r == '\n' || r == '\r' }), "; ")
	}
	ls.diags = append(ls.diags, flows.Diagnostic{Pos: pos, Code: code, Message: msg, Chain: chain})
}

// warnf adds a warning: a likely mistake that does not refuse the flow.
func (ls *loadState) warnf(pos flows.Pos, code flows.Code, format string, args ...any) {
	n := len(ls.diags)
	ls.addf(pos, code, nil, format, args...)
	if len(ls.diags) > n {
		ls.diags[n].Severity = flows.SeverityWarning
	}
}

// computeSources fills each flow's source closure and hashes.
func (ls *loadState) computeSources() {
	memo := map[string][]flows.File{}
	for _, f := range ls.mod.Flows {
		file := ls.declFile[f.Name]
		if _, ok := memo[file]; !ok {
			memo[file] = ls.closure(file)
		}
		src := memo[file]
		ls.mod.SetSources(f.Name, src)
		f.SourceHash = flows.HashSources(src)
		f.Hash = flowHash(f.Name, f.SourceHash)
	}
}

// closure is the file and everything it loads, transitively, sorted.
func (ls *loadState) closure(file string) []flows.File {
	seen := map[string]bool{}
	var visit func(p string)
	visit = func(p string) {
		fs, ok := ls.files[p]
		if !ok || seen[p] {
			return
		}
		seen[p] = true
		for _, d := range fs.loads {
			visit(d)
		}
	}
	visit(file)
	out := make([]flows.File, 0, len(seen))
	for p := range seen {
		out = append(out, ls.files[p].file)
	}
	slices.SortFunc(out, func(a, b flows.File) int { return strings.Compare(a.Path, b.Path) })
	return out
}

func flowHash(name, sourceHash string) string {
	h := sha256.Sum256([]byte("weir.flows.flow/v1\x00" + name + "\x00" + sourceHash))
	return hex.EncodeToString(h[:])
}

// predeclared is what a flow script sees besides Starlark's universe: the
// builtins, a json module (encode/decode are pure), a range that refuses
// lengths no loop could finish within the step limit (range itself is
// lazy, but list(range(n)) would allocate without counting steps), and
// json, str, repr and print guarded against deep values (limits.go).
var predeclared = starlark.StringDict{
	"flow":     starlark.NewBuiltin("flow", builtinFlow),
	"task":     starlark.NewBuiltin("task", builtinTask),
	"subflow":  starlark.NewBuiltin("subflow", builtinSubflow),
	"fanout":   starlark.NewBuiltin("fanout", builtinFanout),
	"wait":     starlark.NewBuiltin("wait", builtinWait),
	"branch":   starlark.NewBuiltin("branch", builtinBranch),
	"agent":    starlark.NewBuiltin("agent", builtinAgent),
	"schedule": starlark.NewBuiltin("schedule", builtinSchedule),
	"on_event": starlark.NewBuiltin("on_event", builtinOnEvent),
	"json":     guardedJSON,
	"range":    starlark.NewBuiltin("range", builtinRange),
	"str":      guardValues("str", starlark.Universe["str"]),
	"repr":     guardValues("repr", starlark.Universe["repr"]),
	"print":    guardValues("print", starlark.Universe["print"]),
}

func builtinRange(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	r, err := starlark.Call(thread, starlark.Universe["range"], args, kwargs)
	if err != nil {
		return nil, err
	}
	limit := front.StepLimit(thread)
	if limit == 0 {
		limit = DefaultMaxSteps
	}
	if n := r.(starlark.Sequence).Len(); uint64(n) > limit {
		return nil, fmt.Errorf("range of %d elements: longer than the step limit (%d), so no loop over it could finish", n, limit)
	}
	return r, nil
}

// languages are the flow languages besides Starlark, each chosen by the
// ending of a file's path. Their builtins call the Starlark builtins
// through a declarer.
var languages = []front.Language{luafront.Language{}}

func languageOf(path string) front.Language {
	for _, l := range languages {
		if strings.HasSuffix(path, l.Ext()) {
			return l
		}
	}
	return nil
}

// execOther runs a file of another language at load time.
func (ls *loadState) execOther(fs *fileState) error {
	fs.state = running
	thread := &starlark.Thread{Name: fs.file.Path, Print: func(*starlark.Thread, string) {}}
	thread.SetLocal(localLoad, ls)
	thread.SetLocal(localFile, fs)
	front.SetStepLimit(thread, ls.loader.maxSteps())
	err := fs.other.Run(declarer{thread}, ls.loader.maxSteps())
	if err == nil {
		fs.state = done
		return nil
	}
	fs.state = failed
	ls.incomplete = true
	var se *front.ScriptError
	switch {
	case errors.As(err, &se) && se.Limit != "":
		ls.addf(se.Pos, flows.CodeScriptLimit, nil, "%s", se.Msg)
	case se != nil:
		ls.addf(se.Pos, flows.CodeScript, nil, "%s", se.Msg)
	default:
		ls.addf(flows.Pos{File: fs.file.Path}, flows.CodeScript, nil, "%v", err)
	}
	return errLoadFailed
}

// declarer hands another language's builtin calls to the Starlark
// builtins, on a thread that carries the load.
type declarer struct{ thread *starlark.Thread }

func (d declarer) Declare(name string, args starlark.Tuple, kwargs []starlark.Tuple, site *front.Site) (starlark.Value, error) {
	if !slices.Contains(front.Builtins, name) {
		return nil, fmt.Errorf("%s is not a builtin that declares flows", name)
	}
	d.thread.SetLocal(localSite, site)
	defer d.thread.SetLocal(localSite, nil)
	return starlark.Call(d.thread, predeclared[name], args, kwargs)
}
