package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/script"
	"github.com/weirhq/weir/runtime/internal/clock"
	ownerctx "github.com/weirhq/weir/runtime/internal/owner"
	"github.com/weirhq/weir/runtime/store"
)

// SourceFile is one flow file sent for registration.
type SourceFile struct {
	Path string `json:"path"`
	Src  string `json:"src"`
}

// RegisteredFlow describes one registered flow version.
type RegisteredFlow struct {
	Name  string `json:"name"`
	Hash  string `json:"hash"`
	Doc   string `json:"doc,omitempty"`
	Nodes int    `json:"nodes"`
	// Input is the JSON schema the flow declares for a run's input, if
	// any: what a caller (an MCP client, say) must send.
	Input json.RawMessage `json:"input,omitempty"`
	// Owner registered the name first and is the only one who may
	// register new versions of it ("" for a name registered before flows
	// had owners).
	Owner string `json:"owner,omitempty"`
	// InputOmitted says a listing left Input out: it is larger than
	// MaxListedInputBytes.
	InputOmitted bool `json:"input_omitted,omitempty"`
}

// RegisterResult answers a registration: the versions stored, or the
// diagnostics that refused them (then nothing was stored).
type RegisterResult struct {
	Flows []RegisteredFlow `json:"flows"`
	// Schedules are the schedules the files declare, as stored.
	Schedules []RegisteredSchedule `json:"schedules,omitempty"`
	// Triggers are the triggers (on_event) the files declare.
	Triggers    []RegisteredTrigger `json:"triggers,omitempty"`
	Diagnostics flows.Diagnostics   `json:"diagnostics,omitempty"`
}

// RegisteredSchedule is a schedule a registration stored: its name, its
// flow and its next tick.
type RegisteredSchedule struct {
	Name   string    `json:"name"`
	Flow   string    `json:"flow"`
	Next   time.Time `json:"next"`
	Paused bool      `json:"paused,omitempty"`
}

// Register registers files as the engine's own program (owner ""); see
// RegisterAs.
func (e *Engine) Register(ctx context.Context, files []SourceFile) (*RegisterResult, error) {
	return e.RegisterAs(ctx, "", files)
}

// RegisterAs checks files together against the registered flows and the
// installed tools, and stores a version of every flow they declare, owned
// by owner. A flow name belongs to the owner who registered it first:
// if any name the files declare belongs to someone else, nothing is
// stored, the refusal is audited and the error is E_FORBIDDEN
// (docs/design.md §11). A name whose latest version has no owner (it was
// registered before flows had owners) is taken by its next registrant.
func (e *Engine) RegisterAs(ctx context.Context, owner string, files []SourceFile) (*RegisterResult, error) {
	// The registration's evaluation takes its owner's share of the
	// sandbox, queued like that owner's calls.
	ctx = ownerctx.WithOwner(ctx, owner)
	if err := e.admission.checkDisk(); err != nil {
		return nil, err
	}
	in := make([]flows.File, len(files))
	for i, f := range files {
		in[i] = flows.File{Path: f.Path, Src: []byte(f.Src)}
	}
	// The registry runs the scripts and checks the files outside its lock
	// (a slow script holds up no one) and hands the versions to
	// the registrar's put under it: stored all or none, once every name is known
	// to be the caller's, serialized against every other registration.
	var commitErr error
	var scheduled []RegisteredSchedule
	var triggered []RegisteredTrigger
	var prev map[string]string
	vs, ds, err := e.registry.RegisterCommit(ctx, in, func(ctx context.Context, m *flows.Module, vs []*flows.Version) error {
		if owner == "" {
			if commitErr = ownerlessDecls(m); commitErr != nil {
				return commitErr
			}
		}
		// The latest versions before these, for the report on parked
		// callers (parkedcallers.go): read under the registry's lock.
		prev = latestHashes(ctx, e.st, vs)
		if commitErr = e.registrar.put(ctx, owner, vs); commitErr == nil {
			scheduled, triggered, commitErr = e.registrar.putDecls(ctx, owner, m)
		}
		return commitErr
	})
	if commitErr != nil {
		return nil, commitErr
	}
	if err != nil {
		return nil, e.admission.storageFailed(err)
	}
	res := &RegisterResult{Diagnostics: ds, Flows: []RegisteredFlow{}, Schedules: scheduled, Triggers: triggered}
	for _, v := range vs {
		res.Flows = append(res.Flows, RegisteredFlow{Name: v.Flow.Name, Hash: v.Flow.Hash, Doc: v.Flow.Doc, Nodes: len(v.Flow.Nodes), Input: v.Flow.Input, Owner: owner})
	}
	if len(vs) > 0 && ds.Err() == nil {
		res.Diagnostics = append(res.Diagnostics, e.registrar.registeredFleetWarnings(ctx, vs)...)
	}
	if len(vs) > 0 && len(ds.Errors()) == 0 {
		// Stored: what the parked runs of older versions make of them.
		res.Diagnostics = append(res.Diagnostics, parkedReport{st: e.st, book: e.book, log: e.log, prev: prev}.warnings(ctx, vs)...)
	}
	return res, nil
}

// ownerlessDecls refuses the schedules and triggers of the engine's own
// program (Register, owner ""): their runs are their owner's, and it has
// none to give them. Nothing is registered.
func ownerlessDecls(m *flows.Module) error {
	what, name, pos := "", "", flows.Pos{}
	switch {
	case len(m.Schedules) > 0:
		what, name, pos = "schedule", m.Schedules[0].Name, m.Schedules[0].Pos
	case len(m.Triggers) > 0:
		what, name, pos = "trigger", m.Triggers[0].Name, m.Triggers[0].Pos
	default:
		return nil
	}
	return protocolErr(CodeBadRequest, "%s: %s %q needs an owner for its runs: register it as an owner (RegisterAs); nothing was registered", pos, what, name)
}

// registrar stores the versions a registration checked (the registry
// hands them over under its lock), once every name is the caller's, and
// audits the names it refuses (docs/design.md §2.2, §11).
type registrar struct {
	st        store.Store
	clock     clock.Clock
	log       hclog.Logger
	admission *admissionGate
	auditor   *auditor
	// roll is read for the registered flows' tools that some live daemon
	// lacks (roll.go).
	roll *fleetRoll
}

// registeredFleetWarnings warns of the registered flows' tools that some
// live daemon of the fleet lacks or has from another plugin binary. The
// versions are stored: a roll that cannot be read is logged, not an error.
func (r *registrar) registeredFleetWarnings(ctx context.Context, vs []*flows.Version) flows.Diagnostics {
	fs := make([]*flows.Flow, len(vs))
	for i, v := range vs {
		fs[i] = v.Flow
	}
	ws, err := r.roll.warnings(ctx, fs)
	if err != nil {
		r.log.Error("reading the fleet's roll for a registration's warnings", "error", err)
	}
	return ws
}

// flowOwnerErr says a name belongs to someone else, or is nil.
func flowOwnerErr(tx store.Tx, owner, name string) error {
	latest, err := tx.FlowVersionLatest(name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return err
	case latest.Owner != "" && latest.Owner != owner:
		return &Error{Code: CodeForbidden, Class: ClassProtocol,
			Message: fmt.Sprintf("flow %q belongs to the owner who registered it first; only that owner may register new versions of it (choose another name)", name)}
	}
	return nil
}

// registerUpdateBytes bounds what one Update of a registration writes: a
// registration's versions go in as few Updates as fit, one durable commit
// for a registration of a few flows. It is half of what one Update of
// either store holds (pgstore.MaxUpdateBytes, about Badger's transaction
// with its default options), so the estimate's slack never meets the
// store's limit. A version larger than the bound goes in an Update alone.
const registerUpdateBytes = 1 << 20

// put stores a registration's versions as owner's, after checking
// that every name is owner's to register. The versions are written in as
// few Updates as registerUpdateBytes allows, and each Update checks the
// names it writes again, so the check also holds against another daemon
// sharing the store. A registration that fits one Update is stored all or
// none; a larger one is checked as a whole first, then written Update by
// Update (a crash between two leaves the first ones stored, each version
// whole).
func (r *registrar) put(ctx context.Context, owner string, vs []*flows.Version) error {
	now := r.clock.Now()
	var chunks [][]storedVersion
	var chunkBytes int
	for _, v := range vs {
		ir, err := json.Marshal(v.Flow)
		if err != nil {
			return r.admission.storageFailed(err)
		}
		sv := storedVersion{v: v, ir: ir}
		n := sv.bytes()
		if len(chunks) == 0 || chunkBytes+n > registerUpdateBytes {
			chunks = append(chunks, nil)
			chunkBytes = 0
		}
		chunks[len(chunks)-1] = append(chunks[len(chunks)-1], sv)
		chunkBytes += n
	}
	if len(chunks) > 1 {
		// Written in several Updates: refuse before the first one
		// if any name is someone else's.
		var refused []string
		if err := r.st.View(ctx, func(tx store.Tx) error {
			var err error
			refused, err = refusedNames(tx, owner, vs)
			return err
		}); err != nil {
			return r.admission.readFailed(err)
		}
		if len(refused) > 0 {
			return r.refuse(ctx, owner, refused, true)
		}
	}
	for i, chunk := range chunks {
		var refused []string
		err := r.st.Update(ctx, func(tx store.Tx) error {
			names := make([]*flows.Version, len(chunk))
			for j, sv := range chunk {
				names[j] = sv.v
			}
			var err error
			if refused, err = refusedNames(tx, owner, names); err != nil || len(refused) > 0 {
				return err
			}
			for _, sv := range chunk {
				if err := putVersion(tx, sv.v, sv.ir, owner, now); err != nil {
					return fmt.Errorf("storing flow %s: %w", sv.v.Flow.Name, err)
				}
			}
			return nil
		})
		if err != nil {
			return r.admission.storageFailed(err)
		}
		if len(refused) > 0 {
			// With one Update this is the check; with several, only
			// another daemon's registration, between the check and
			// this Update, can have taken a name.
			return r.refuse(ctx, owner, refused, i == 0)
		}
	}
	return nil
}

// storedVersion is a version with its IR encoded for the store.
type storedVersion struct {
	v  *flows.Version
	ir []byte
}

// bytes estimates what storing the version writes: its IR and sources,
// and a little for the keys and the records around them.
func (sv storedVersion) bytes() int {
	n := len(sv.ir) + 256
	for _, f := range sv.v.Sources {
		n += len(f.Path) + len(f.Src) + 64
	}
	return n
}

// refusedNames are the names of vs that belong to someone other than
// owner.
func refusedNames(tx store.Tx, owner string, vs []*flows.Version) ([]string, error) {
	var refused []string
	for _, v := range vs {
		err := flowOwnerErr(tx, owner, v.Flow.Name)
		var fe *Error
		switch {
		case errors.As(err, &fe):
			refused = append(refused, v.Flow.Name)
		case err != nil:
			return nil, err
		}
	}
	return refused, nil
}

// refuse audits a registration refused for names that belong to
// someone else and answers its E_FORBIDDEN; nothing says whether nothing
// of the registration was stored.
func (r *registrar) refuse(ctx context.Context, owner string, refused []string, nothing bool) error {
	for _, name := range refused {
		r.auditor.refused(ctx, owner, "register", "flow", name)
	}
	stored := "nothing was registered"
	if !nothing {
		stored = "the flows before them were registered"
	}
	return &Error{Code: CodeForbidden, Class: ClassProtocol,
		Message: fmt.Sprintf("flow %s belongs to the owner who registered it first; only that owner may register new versions (%s; choose another name)", strings.Join(quoteAll(refused), ", "), stored)}
}

// putVersion writes one version and its sources.
func putVersion(tx store.Tx, v *flows.Version, ir []byte, owner string, now time.Time) error {
	if err := putSource(tx, v.Flow.SourceHash, v.Sources); err != nil {
		return err
	}
	return tx.FlowVersionPut(&store.FlowVersion{Name: v.Flow.Name, Hash: v.Flow.Hash, IR: ir, Owner: owner, RegisteredAt: now})
}

// putSource writes a source bundle under its hash.
func putSource(tx store.Tx, hash string, files []flows.File) error {
	sf := make([]store.SourceFile, len(files))
	for i, f := range files {
		sf[i] = store.SourceFile{Path: f.Path, Src: f.Src}
	}
	return tx.SourcePut(&store.Source{Hash: hash, Files: sf})
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// Bounds of a flow listing (Flows). Every user lists every flow: a page
// is at most MaxFlowListLimit flows, each with its doc's summary line
// (flows.DocSummary) and its input schema up to MaxListedInputBytes.
const (
	MaxFlowListLimit    = 100
	MaxListedInputBytes = 64 << 10
)

// FlowListParams selects one page of Flows.
type FlowListParams struct {
	// After is an exclusive flow name to page from ("": the first).
	After string
	// Limit bounds the page (0 or more than MaxFlowListLimit:
	// MaxFlowListLimit).
	Limit int
}

// Flows lists one page of the registered flows' latest versions, by name,
// as a listing shows them: the doc as its summary line, the input schema
// only if it is at most MaxListedInputBytes (else InputOmitted). A flow's
// own read (FlowSource) carries both whole. Versions are read one at a
// time: what a page costs is its own size, not the store's.
func (e *Engine) Flows(ctx context.Context, p FlowListParams) ([]RegisteredFlow, error) {
	limit := p.Limit
	if limit <= 0 || limit > MaxFlowListLimit {
		limit = MaxFlowListLimit
	}
	var names []string
	if err := e.st.View(ctx, func(tx store.Tx) error {
		var err error
		names, err = tx.FlowNameList(store.FlowNameListParams{After: p.After, Limit: limit})
		return err
	}); err != nil {
		return nil, e.admission.readFailed(err)
	}
	out := make([]RegisteredFlow, 0, len(names))
	vstore := versionStore{st: e.st, cache: e.flowCache}
	for _, name := range names {
		var v *store.FlowVersion
		if err := e.st.View(ctx, func(tx store.Tx) error {
			var err error
			v, err = tx.FlowVersionLatest(name)
			return err
		}); err != nil {
			return nil, e.admission.readFailed(err)
		}
		fv, err := vstore.load(ctx, v)
		if err != nil {
			return nil, err
		}
		out = append(out, listedFlow(v, fv.Flow))
	}
	return out, nil
}

// listedFlow is a version as a listing shows it.
func listedFlow(v *store.FlowVersion, f *flows.Flow) RegisteredFlow {
	rf := RegisteredFlow{Name: v.Name, Hash: v.Hash, Doc: flows.DocSummary(f.Doc), Nodes: len(f.Nodes), Input: f.Input, Owner: v.Owner}
	if len(rf.Input) > MaxListedInputBytes {
		rf.Input, rf.InputOmitted = nil, true
	}
	return rf
}

// versionStore persists the flow registry's versions in the engine's
// store: the IR by (name, hash) and the sources by their own hash. Decoded
// IR comes from the engine's flow cache (versions never change), which
// registration and the runs share: registration resolves the same callees
// again and again.
type versionStore struct {
	st    store.Store
	cache *script.Cache
	clock clock.Clock // stamps RegisteredAt (nil: versions are not stamped)
}

// VersionPut collects v for the registration that ctx carries (see
// RegisterAs, which stores it with its owner); without one it stores v
// unowned.
func (s versionStore) VersionPut(ctx context.Context, v *flows.Version) error {
	ir, err := json.Marshal(v.Flow)
	if err != nil {
		return err
	}
	var now time.Time
	if s.clock != nil {
		now = s.clock.Now().UTC()
	}
	return s.st.Update(ctx, func(tx store.Tx) error { return putVersion(tx, v, ir, "", now) })
}

// VersionGet finds a version by hash alone among the latest versions; the
// engine itself always looks versions up by name and hash.
func (s versionStore) VersionGet(ctx context.Context, hash string) (*flows.Version, error) {
	var found *store.FlowVersion
	err := s.st.View(ctx, func(tx store.Tx) error {
		vs, err := tx.FlowVersionList()
		for _, v := range vs {
			if v.Hash == hash {
				found = v
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if found == nil {
		return nil, fmt.Errorf("version %s: %w", hash, flows.ErrNotFound)
	}
	return s.load(ctx, found)
}

func (s versionStore) VersionLatest(ctx context.Context, name string) (*flows.Version, error) {
	var v *store.FlowVersion
	err := s.st.View(ctx, func(tx store.Tx) error {
		var err error
		v, err = tx.FlowVersionLatest(name)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("flow %s: %w", name, flows.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return s.load(ctx, v)
}

func (s versionStore) load(ctx context.Context, v *store.FlowVersion) (*flows.Version, error) {
	f, err := s.cache.Flow(ctx, v.Hash, func(context.Context) ([]byte, error) { return v.IR, nil })
	if err != nil {
		return nil, fmt.Errorf("flow %s: %w", v.Name, err)
	}
	return &flows.Version{Flow: f}, nil
}
