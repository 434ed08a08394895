package host

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/runtime/internal/owner"
	"github.com/weirhq/weir/sdk/wire"
)

// A revision-2 plugin may change its tool list after launch (an MCP
// server's tools, say): it sends its whole new manifest on the
// WatchManifest stream, and the host swaps the plugin's tools in the set
// in service, as a rescan would, without relaunching anything. A
// revision-1 plugin is never asked.

// readManifests receives the manifests a revision-2 plugin sends after
// launch and hands each one that checks to changed. It returns when the
// stream ends: the instance stopped, or the plugin's list never changes
// (Unimplemented).
func (i *instance) readManifests(spec launchSpec, stream wire.Plugin_WatchManifestClient, changed func(*instance)) {
	defer close(i.watchDone)
	for {
		msg, err := stream.Recv()
		if err != nil {
			if c := status.Code(err); c != codes.Unimplemented && c != codes.Canceled {
				spec.logger.Debug("plugin manifest watch ended", "plugin", spec.name, "error", err)
			}
			return
		}
		m, err := manifestFromWire(spec.name, hex.EncodeToString(spec.sum), msg.GetManifest())
		if err == nil && m.ProtocolVersion != i.manifest.ProtocolVersion {
			err = fmt.Errorf("protocol version %d, the launch's was %d", m.ProtocolVersion, i.manifest.ProtocolVersion)
		}
		if err != nil {
			spec.logger.Error("plugin sent a bad manifest; its tools stay as they were", "plugin", spec.name, "error", err)
			continue
		}
		m.ConfigHash = i.manifest.ConfigHash
		i.latest.Store(m)
		changed(i)
	}
}

// declared is the manifest the instance declares now: the launch's, or
// the last one it sent since.
func (i *instance) declared() *PluginManifest {
	if m := i.latest.Load(); m != nil {
		return m
	}
	return i.manifest
}

// watchManifest opens the manifest stream of a revision-2 instance.
func (i *instance) watchManifest(ctx context.Context, spec launchSpec) error {
	i.watchDone = make(chan struct{})
	if i.manifest.ProtocolVersion < 2 || spec.manifestChanged == nil {
		close(i.watchDone)
		return nil
	}
	stream, err := i.rpc.WatchManifest(ctx, &wire.WatchManifestRequest{})
	if err != nil {
		close(i.watchDone)
		return err
	}
	go i.readManifests(spec, stream, spec.manifestChanged)
	return nil
}

// manifestChanged puts the tools inst declares now in service for plugin
// name, if inst is the plugin's instance in service (one launched only to
// read its manifest, or already replaced, changes nothing). It caches the
// manifest, so that a rescan or the next start sees the list too. It
// reads the instance's latest manifest once it holds h.rescan, so that of
// two changes racing the newer one stands.
func (h *Host) manifestChanged(inst *instance, name string) {
	select {
	case h.rescan <- struct{}{}:
	case <-inst.ended:
		return // stopping; Rescan may be what stops it
	}
	defer func() { <-h.rescan }()
	prev := h.set.Load()
	if prev == nil {
		return
	}
	p := prev.plugins[name]
	if p == nil {
		return
	}
	p.mu.Lock()
	current := p.inst == inst && !p.retired
	p.mu.Unlock()
	if !current {
		return
	}
	h.swapManifest(prev, p, inst.declared())
}

// swapManifest stores a set in which p's tools are those of m. h.rescan
// is held.
func (h *Host) swapManifest(prev *toolSet, p *pluginState, m *PluginManifest) {
	if old := prev.catalog.manifest(p.name); old != nil && sameManifest(old, m) {
		return
	}
	_ = writeManifestCache(h.cfg.PluginsDir, m) // best effort: a cache
	next := &toolSet{catalog: prev.catalog.withManifest(p.name, m), plugins: prev.plugins, tools: map[string]*toolState{}, gone: map[string]string{}}
	for n, why := range prev.gone {
		next.gone[n] = why
	}
	for n, t := range prev.tools {
		if t.plugin != p {
			next.tools[n] = t
		}
	}
	var added, removed []string
	for _, tm := range m.Tools {
		if _, taken := next.tools[tm.Name]; taken {
			continue // another plugin's: cannot happen, names carry the plugin
		}
		schema, err := wire.CompileSchema(string(tm.InputSchema))
		if err != nil {
			h.logger.Error("tool unavailable: bad input schema", "tool", tm.Name, "error", err)
			continue
		}
		t := &toolState{m: tm, schema: schema, plugin: p}
		was := prev.tools[tm.Name]
		if !tm.Idempotent {
			if was != nil && was.serial != nil {
				t.serial = was.serial
			} else {
				t.serial = owner.NewSlots(1)
			}
		}
		if was == nil {
			added = append(added, tm.Name)
		}
		delete(next.gone, tm.Name)
		next.tools[tm.Name] = t
	}
	at := time.Now().UTC().Format(time.RFC3339)
	for n, t := range prev.tools {
		if _, ok := next.tools[n]; !ok && t.plugin == p {
			removed = append(removed, n)
			next.gone[n] = fmt.Sprintf("plugin %s no longer offers this tool: its tool list changed at %s", p.name, at)
		}
	}
	h.set.Store(next)
	h.logger.Info("plugin tool list changed", "plugin", p.name, "added", added, "removed", removed, "tools", len(m.Tools))
}

// manifest is plugin name's manifest in the catalog, nil if none.
func (c *Catalog) manifest(name string) *PluginManifest {
	for _, p := range c.plugins {
		if p.Name == name {
			return p.Manifest
		}
	}
	return nil
}

// withManifest is a copy of c in which plugin name declares m.
func (c *Catalog) withManifest(name string, m *PluginManifest) *Catalog {
	out := &Catalog{plugins: append([]PluginInfo(nil), c.plugins...), tools: map[string]ToolManifest{}}
	for i := range out.plugins {
		if out.plugins[i].Name == name {
			out.plugins[i].Manifest, out.plugins[i].Err = m, nil
		}
		if pm := out.plugins[i].Manifest; pm != nil {
			for _, t := range pm.Tools {
				out.tools[t.Name] = t
			}
		}
	}
	return out
}
