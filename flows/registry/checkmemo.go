package registry

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"reflect"
	"slices"
	"sync"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/script"
)

// A registration's check is a function of its files and of what the checks
// asked: the tools the catalog resolved (and its list of names) and the
// latest registered version of every flow called from outside the files.
// Scripts are deterministic, so the same files asking the same questions
// get the same answers back. A registry with a Cache keeps each clean
// check (no error, nothing failed to resolve) as a checkMemo under the
// files' content hash and order (checkKey); a registration of the same files asks the recorded
// questions again and, when every answer is unchanged, skips its scripts
// and checks. Re-registering a repository of flows of which few changed
// then costs the changed files' checks and a few lookups.
type checkMemo struct {
	mod   *flows.Module
	diags flows.Diagnostics
	tools []toolAnswer
	names []string // the catalog's names, when asked
	named bool
	flows []flowAnswer
}

type toolAnswer struct {
	name string
	info flows.ToolInfo
	ok   bool
}

type flowAnswer struct {
	name string
	hash string // "": no registered version
}

// valid reports whether every question of the memo gets the same answer
// from req now.
func (m *checkMemo) valid(req flows.AnalyzeRequest) bool {
	if (len(m.tools) > 0 || m.named) && req.Tools == nil {
		return false
	}
	for _, t := range m.tools {
		info, ok := req.Tools.LookupTool(t.name)
		if ok != t.ok || !reflect.DeepEqual(info, t.info) {
			return false
		}
	}
	if m.named {
		named, _ := req.Tools.(flows.ToolLister)
		if named == nil || !slices.Equal(named.Names(), m.names) {
			return false
		}
	}
	if len(m.flows) > 0 && req.Lookup == nil {
		return false
	}
	for _, f := range m.flows {
		got, err := req.Lookup(f.name)
		if err != nil {
			return false // the check itself will meet the error
		}
		hash := ""
		if got != nil {
			hash = got.Hash
		}
		if hash != f.hash {
			return false
		}
	}
	return true
}

// checkRecorder stands between a check and its request's catalog and
// lookup, and records every answer for a memo.
type checkRecorder struct {
	req    flows.AnalyzeRequest
	mu     sync.Mutex
	memo   checkMemo
	failed bool // a lookup failed: the check is not kept
}

// newCheckRecorder returns a recorder and the request to check with.
func newCheckRecorder(req flows.AnalyzeRequest) (*checkRecorder, flows.AnalyzeRequest) {
	r := &checkRecorder{req: req}
	out := req
	if req.Tools != nil {
		out.Tools = recordingCatalog{r}
	}
	if req.Lookup != nil {
		out.Lookup = r.lookup
	}
	return r, out
}

func (r *checkRecorder) lookup(name string) (*flows.Flow, error) {
	f, err := r.req.Lookup(name)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.failed = true
		return f, err
	}
	a := flowAnswer{name: name}
	if f != nil {
		a.hash = f.Hash
	}
	r.memo.flows = append(r.memo.flows, a)
	return f, nil
}

// recordingCatalog is the catalog of a recorded check. It lists names
// when the request's catalog does (nil otherwise, which the checks treat
// as a catalog that cannot list them).
type recordingCatalog struct{ r *checkRecorder }

func (c recordingCatalog) LookupTool(name string) (flows.ToolInfo, bool) {
	info, ok := c.r.req.Tools.LookupTool(name)
	c.r.mu.Lock()
	c.r.memo.tools = append(c.r.memo.tools, toolAnswer{name: name, info: info, ok: ok})
	c.r.mu.Unlock()
	return info, ok
}

func (c recordingCatalog) Names() []string {
	named, ok := c.r.req.Tools.(flows.ToolLister)
	if !ok {
		return nil
	}
	names := named.Names()
	c.r.mu.Lock()
	c.r.memo.named, c.r.memo.names = true, slices.Clone(names)
	c.r.mu.Unlock()
	return names
}

// checkKey names a check of files: their content and the order they were
// given in, which orders the module's flows (HashSources does not depend
// on it).
func checkKey(files []flows.File) string {
	h := sha256.New()
	h.Write([]byte(flows.HashSources(files)))
	var n [8]byte
	for _, f := range files {
		binary.BigEndian.PutUint64(n[:], uint64(len(f.Path)))
		h.Write(n[:])
		h.Write([]byte(f.Path))
	}
	return "check:" + hex.EncodeToString(h.Sum(nil))
}

// checkCost is what a memo is charged in a Cache: its module holds the
// files and their flows' IR, which the source factor covers.
func checkCost(files []flows.File) int64 {
	var n int64
	for _, f := range files {
		n += int64(len(f.Path) + len(f.Src))
	}
	return script.SourceCostFactor * n
}

// analyze checks req's files in the registry's scripts, or answers from
// the memo of an earlier check of the same files whose questions all get
// the same answers now (see checkMemo).
func (r *Registry) analyze(ctx context.Context, req flows.AnalyzeRequest) (*flows.Module, flows.Diagnostics, error) {
	if r.checks == nil {
		return r.scripts.Analyze(ctx, req)
	}
	key := checkKey(req.Files)
	if v, ok := r.checks.Memo(key); ok {
		if m := v.(*checkMemo); m.valid(req) {
			r.checksSkipped.Add(1)
			return m.mod, slices.Clone(m.diags), nil
		}
	}
	rec, recReq := newCheckRecorder(req)
	m, ds, err := r.scripts.Analyze(ctx, recReq)
	if err != nil || len(ds.Errors()) > 0 {
		return m, ds, err
	}
	rec.mu.Lock()
	keep := !rec.failed
	memo := rec.memo
	rec.mu.Unlock()
	if keep {
		memo.mod, memo.diags = m, slices.Clone(ds)
		r.checks.Remember(key, &memo, checkCost(req.Files))
	}
	return m, ds, nil
}
