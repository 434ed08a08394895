package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/flows/registry"
	"github.com/weirhq/weir/internal/flowgen"
	"github.com/weirhq/weir/runtime/api"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/host"
)

// benchTools are the installed tools the generated flows call.
var benchTools = flowgen.Tools{Idem: "testkit.echo", AtMostOnce: "mail.send"}

// genFlowSet is count flows of n nodes in the language of ext (one of
// flowgen.Exts), one file each (flowgen.Set).
func genFlowSet(ext string, count, n int) []apitypes.SourceFile {
	set := flowgen.Set(ext, count, n, benchTools)
	files := make([]apitypes.SourceFile, len(set))
	for i, f := range set {
		files[i] = apitypes.SourceFile{Path: f.Path, Src: string(f.Src)}
	}
	return files
}

// registration is scenario 7: 1,000 flows of 50 nodes, registered one
// request per flow as flows arrive in production, and one flow of 10,000
// nodes, both through the real daemon's POST /v1/flows (check, store, and
// the HTTP round trip). The limit beside each is the same registration in
// process on registry.Registry with an in-memory version store and the
// installed plugins' catalog: the cost of checking alone.
func registration(b *bench) ([]row, error) {
	catDir, err := b.dir("catalog")
	if err != nil {
		return nil, err
	}
	cat, err := host.LoadCatalog(b.plugins, catDir)
	if err != nil {
		return nil, err
	}
	set := genFlowSet(".star", 1000, 50)
	luaSet := genFlowSet(".lua", 1000, 50)
	big := []apitypes.SourceFile{{Path: "big.star", Src: flowgen.Flow(".star", "big", 10_000, nil, benchTools)}}

	inProcess := func(batches [][]apitypes.SourceFile) (time.Duration, error) {
		reg := registry.NewRegistry(flows.NewMemoryStore(), cat)
		start := time.Now()
		for _, files := range batches {
			in := make([]flows.File, len(files))
			for i, f := range files {
				in[i] = flows.File{Path: f.Path, Src: []byte(f.Src)}
			}
			if _, ds, err := reg.Register(b.ctx, in); err != nil || len(ds.Errors()) > 0 {
				return 0, fmt.Errorf("in process: %v %v", err, ds)
			}
		}
		return time.Since(start), nil
	}
	viaDaemon := func(name string, batches [][]apitypes.SourceFile) (time.Duration, error) {
		d, err := b.startDaemon(name)
		if err != nil {
			return 0, err
		}
		defer d.Kill()
		c := d.Client()
		start := time.Now()
		for _, files := range batches {
			if _, err := c.FlowRegister(b.ctx, files...); err != nil {
				return 0, fmt.Errorf("%s: %w", files[0].Path, err)
			}
		}
		return time.Since(start), nil
	}

	each := make([][]apitypes.SourceFile, len(set))
	luaEach := make([][]apitypes.SourceFile, len(luaSet))
	for i := range set {
		each[i] = set[i : i+1]
		luaEach[i] = luaSet[i : i+1]
	}
	cases := []struct {
		figure  string
		batches [][]apitypes.SourceFile
	}{
		{"register 1,000 flows × 50 nodes, one request each", each},
		{"register 1,000 Lua flows × 50 nodes, one request each", luaEach},
		{"register 1,000 flows × 50 nodes, one request", [][]apitypes.SourceFile{set}},
		{"register one flow of 10,000 nodes", [][]apitypes.SourceFile{big}},
	}
	var rows []row
	for i, c := range cases {
		size := 0
		for _, files := range c.batches {
			body, err := json.Marshal(apitypes.RegisterRequest{Files: files})
			if err != nil {
				return rows, err
			}
			size = max(size, len(body))
		}
		if size > api.MaxRegisterBody {
			rows = append(rows, row{figure: c.figure, value: fmt.Sprintf("not sent: %d bytes exceed the %d-byte body limit", size, api.MaxRegisterBody)})
			continue
		}
		floor, err := inProcess(c.batches)
		if err != nil {
			return rows, err
		}
		got, err := viaDaemon(fmt.Sprintf("register%d", i), c.batches)
		if err != nil {
			return rows, err
		}
		rows = append(rows, row{figure: c.figure + " (daemon)", value: dur(got),
			limit: "in process " + dur(floor), ratio: ratio(float64(got) / float64(floor)), target: verdict("< 1 s", got < time.Second)})
	}
	return rows, nil
}
