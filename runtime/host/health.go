package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/weirhq/weir/sdk/wire"
)

// ReadHealth reads what plugin name last said of the servers it reaches
// (wire.HealthFile in its state directory under dataDir): nil, nil when
// it wrote nothing. A file beyond wire.MaxHealthBytes, or not JSON, is an
// error: a plugin's report is input like any other.
func ReadHealth(dataDir, name string) (*wire.Health, error) {
	f, err := os.Open(filepath.Join(stateDir(dataDir, name), wire.HealthFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, wire.MaxHealthBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > wire.MaxHealthBytes {
		return nil, fmt.Errorf("plugin %s: %s is larger than %d bytes", name, wire.HealthFile, wire.MaxHealthBytes)
	}
	var h wire.Health
	if err := json.Unmarshal(data, &h); err != nil {
		return nil, fmt.Errorf("plugin %s: %s: %v", name, wire.HealthFile, err)
	}
	return &h, nil
}

// Health returns, per plugin in service that reports it, which of its
// servers it cannot reach (see ReadHealth); plugins whose report cannot
// be read are left out.
func (h *Host) Health() map[string]*wire.Health {
	out := map[string]*wire.Health{}
	for name := range h.set.Load().plugins {
		if hl, err := ReadHealth(h.cfg.DataDir, name); err == nil && hl != nil {
			out[name] = hl
		}
	}
	return out
}
