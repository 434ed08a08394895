package flows

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// File is one flow source file. Path is how diagnostics name it and how
// load() finds it; Src is its content.
type File struct {
	Path string `json:"path"`
	Src  []byte `json:"src"`
}

// Module is the result of loading a set of files together: the flows they
// declare, in declaration order, and which sources each flow needs.
type Module struct {
	// Files are the loaded files, with cleaned paths, in the order given.
	Files []File
	// Flows are the declared flows, in the order their flow() calls ran.
	// A flow whose name was already declared is not included.
	Flows []*Flow
	// Schedules and Triggers are the schedule() and on_event()
	// declarations, in the order their calls ran; one whose name was
	// already declared is not included.
	Schedules []*Schedule
	Triggers  []*Trigger

	byName      map[string]*Flow
	sources     map[string][]File // flow name -> its source closure
	depth       map[string]int    // flow name -> subflow depth, after Check
	declSources map[string][]File // Schedule.Decl or Trigger.Decl -> its source closure
}

// Flow returns the flow named name, or nil.
func (m *Module) Flow(name string) *Flow { return m.byName[name] }

// Sources returns the files a flow needs at run time: the file that
// declared it and every file that file loads, transitively, sorted by path.
// These are what a store keeps and what NewEvaluator re-loads.
func (m *Module) Sources(name string) []File { return m.sources[name] }

// Depth returns the length of the longest subflow chain below the named
// flow, as computed by the last check; false if it was not computed (the
// flow is on a cycle, or calls a flow that could not be resolved).
func (m *Module) Depth(name string) (int, bool) {
	d, ok := m.depth[name]
	return d, ok
}

// AddFlow adds a flow a front end declared; its name must be new to the
// module.
func (m *Module) AddFlow(f *Flow) {
	if m.byName == nil {
		m.byName = map[string]*Flow{}
	}
	m.Flows = append(m.Flows, f)
	m.byName[f.Name] = f
}

// SetSources records the files the named flow needs at run time (see
// Sources).
func (m *Module) SetSources(name string, files []File) {
	if m.sources == nil {
		m.sources = map[string][]File{}
	}
	m.sources[name] = files
}

// DeclSources returns the files a schedule or trigger needs to evaluate
// its callables, by its Decl ("schedule:NAME"): as Sources for a flow.
func (m *Module) DeclSources(decl string) []File { return m.declSources[decl] }

// SetDeclSources records the files of a declaration (see DeclSources).
func (m *Module) SetDeclSources(decl string, files []File) {
	if m.declSources == nil {
		m.declSources = map[string][]File{}
	}
	m.declSources[decl] = files
}

// Schedule returns the schedule named name, or nil.
func (m *Module) Schedule(name string) *Schedule {
	for _, s := range m.Schedules {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// Trigger returns the trigger named name, or nil.
func (m *Module) Trigger(name string) *Trigger {
	for _, t := range m.Triggers {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// SetDepths records the subflow depths a check computed (see Depth); it
// replaces those of an earlier check.
func (m *Module) SetDepths(depth map[string]int) { m.depth = depth }

// Versions returns one Version per flow, ready to store.
func (m *Module) Versions() []*Version {
	vs := make([]*Version, len(m.Flows))
	for i, f := range m.Flows {
		vs[i] = &Version{Flow: f, Sources: m.sources[f.Name]}
	}
	return vs
}

// HashSources is the content hash of a set of source files: paths and
// contents, independent of the order given. Flow.SourceHash is this hash
// of the flow's sources.
func HashSources(files []File) string {
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	h := sha256.New()
	h.Write([]byte("weir.flows.sources/v1\x00"))
	var n [8]byte
	for _, f := range sorted {
		binary.BigEndian.PutUint64(n[:], uint64(len(f.Path)))
		h.Write(n[:])
		h.Write([]byte(f.Path))
		binary.BigEndian.PutUint64(n[:], uint64(len(f.Src)))
		h.Write(n[:])
		h.Write(f.Src)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// moduleJSON is a Module as it crosses a process boundary: the files once,
// each flow's sources by path.
type moduleJSON struct {
	Files   []File              `json:"files"`
	Flows   []*Flow             `json:"flows"`
	Sources map[string][]string `json:"sources"`
	Depth   map[string]int      `json:"depth,omitempty"`

	Schedules   []*Schedule         `json:"schedules,omitempty"`
	Triggers    []*Trigger          `json:"triggers,omitempty"`
	DeclSources map[string][]string `json:"decl_sources,omitempty"`
}

// filePaths names files by path, as moduleJSON carries them.
func filePaths(files []File) []string {
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = f.Path
	}
	return paths
}

// resolvePaths is the inverse of filePaths over the module's files.
func resolvePaths(byPath map[string]File, owner string, paths []string) ([]File, error) {
	files := make([]File, len(paths))
	for i, p := range paths {
		f, ok := byPath[p]
		if !ok {
			return nil, fmt.Errorf("module: %s needs %s, which is not among its files", owner, p)
		}
		files[i] = f
	}
	return files, nil
}

// MarshalJSON encodes the module's files, flows (as their IR), source
// closures and computed depths.
func (m *Module) MarshalJSON() ([]byte, error) {
	w := moduleJSON{Files: m.Files, Flows: m.Flows, Sources: map[string][]string{}, Depth: m.depth,
		Schedules: m.Schedules, Triggers: m.Triggers}
	for name, files := range m.sources {
		w.Sources[name] = filePaths(files)
	}
	for decl, files := range m.declSources {
		if w.DeclSources == nil {
			w.DeclSources = map[string][]string{}
		}
		w.DeclSources[decl] = filePaths(files)
	}
	return json.Marshal(w)
}

// UnmarshalJSON decodes what MarshalJSON encoded.
func (m *Module) UnmarshalJSON(b []byte) error {
	var w moduleJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	byPath := make(map[string]File, len(w.Files))
	for _, f := range w.Files {
		byPath[f.Path] = f
	}
	*m = Module{Files: w.Files, Flows: w.Flows, Schedules: w.Schedules, Triggers: w.Triggers,
		byName: map[string]*Flow{}, sources: map[string][]File{}, depth: w.Depth}
	for _, f := range w.Flows {
		m.byName[f.Name] = f
	}
	for name, paths := range w.Sources {
		files, err := resolvePaths(byPath, "flow "+name, paths)
		if err != nil {
			return err
		}
		m.sources[name] = files
	}
	for decl, paths := range w.DeclSources {
		files, err := resolvePaths(byPath, decl, paths)
		if err != nil {
			return err
		}
		m.SetDeclSources(decl, files)
	}
	for i, s := range m.Schedules {
		if s == nil {
			return fmt.Errorf("module: schedule %d is null", i)
		}
	}
	for i, t := range m.Triggers {
		if t == nil {
			return fmt.Errorf("module: trigger %d is null", i)
		}
	}
	return nil
}
