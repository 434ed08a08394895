package host

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/weirhq/weir/sdk/dedupe"
	"github.com/weirhq/weir/sdk/wire"
)

// Files in a plugins directory besides the binaries.
const (
	// PinsFile maps each installed plugin's name to the SHA-256 of its
	// binary. Only Install writes it.
	PinsFile = "pins.json"
	// ManifestDir caches manifests by checksum and config section:
	// ManifestDir/SHA256.json (launched without config) or
	// ManifestDir/SHA256-CONFIGHASH.json (see ConfigHash).
	ManifestDir = ".manifests"
	// lockFile serializes concurrent installs.
	lockFile = ".pins.lock"
)

// Pin is one installed plugin: its binary PLUGINS/NAME must hash to SHA256.
type Pin struct {
	SHA256      string    `json:"sha256"`
	InstalledAt time.Time `json:"installed_at"`
}

type pinsDoc struct {
	Version int            `json:"version"`
	Plugins map[string]Pin `json:"plugins"`
}

// ReadPins returns the pins of a plugins directory; a directory without a
// pins file has none.
func ReadPins(pluginsDir string) (map[string]Pin, error) {
	b, err := os.ReadFile(filepath.Join(pluginsDir, PinsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]Pin{}, nil
	}
	if err != nil {
		return nil, err
	}
	var doc pinsDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(pluginsDir, PinsFile), err)
	}
	if doc.Version != 1 {
		return nil, fmt.Errorf("%s: unknown version %d", filepath.Join(pluginsDir, PinsFile), doc.Version)
	}
	for name, p := range doc.Plugins {
		if err := wire.CheckPluginName(name); err != nil {
			return nil, fmt.Errorf("%s: %w", PinsFile, err)
		}
		if _, err := decodeSum(p.SHA256); err != nil {
			return nil, fmt.Errorf("%s: plugin %s: %w", PinsFile, name, err)
		}
	}
	if doc.Plugins == nil {
		doc.Plugins = map[string]Pin{}
	}
	return doc.Plugins, nil
}

func writePins(pluginsDir string, pins map[string]Pin) error {
	b, err := json.MarshalIndent(pinsDoc{Version: 1, Plugins: pins}, "", "  ")
	if err != nil {
		return err
	}
	return dedupe.WriteFileAtomic(filepath.Join(pluginsDir, PinsFile), append(b, '\n'), 0o644)
}

// FileSHA256 returns the hex SHA-256 of the file at path.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func decodeSum(s string) ([]byte, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("%q is not a hex SHA-256", s)
	}
	return b, nil
}

// Install copies the plugin binary at src into pluginsDir and pins it. It
// launches the copy once to read its manifest: the plugin's name is the
// part before the dot of its tool names, and the binary lands at
// pluginsDir/NAME. It replaces an earlier install of the same plugin
// (src may be that very file: installing in place only pins it). A binary
// that is not a weir plugin, speaks another protocol version or declares
// bad tools is refused and nothing changes.
//
// A running Host keeps the pins it read at New until its Rescan: it
// refuses to launch a replaced binary until then.
func Install(pluginsDir, src string, logger hclog.Logger) (*PluginManifest, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	st, err := os.Stat(src)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", src)
	}
	if pluginsDir, err = filepath.Abs(pluginsDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(pluginsDir, 0o755); err != nil {
		return nil, err
	}
	unlock, err := lockDir(pluginsDir)
	if err != nil {
		return nil, err
	}
	defer unlock()

	tmp, sum, err := copyHashed(pluginsDir, src)
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp) // a no-op once renamed

	inst, err := launch(launchSpec{
		path:         tmp,
		sum:          sum,
		logger:       logger,
		maxMsg:       defaultMaxMessageBytes,
		startTimeout: defaultStartTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("installing %s: %w", src, err)
	}
	inst.stop()
	m := inst.manifest
	dest := filepath.Join(pluginsDir, m.Name)
	if err := os.Rename(tmp, dest); err != nil {
		return nil, err
	}
	if err := writeManifestCache(pluginsDir, m); err != nil {
		return nil, err
	}
	pins, err := ReadPins(pluginsDir)
	if err != nil {
		return nil, err
	}
	pins[m.Name] = Pin{SHA256: m.SHA256, InstalledAt: time.Now().UTC().Truncate(time.Second)}
	if err := writePins(pluginsDir, pins); err != nil {
		return nil, err
	}
	pruneManifestCache(pluginsDir, pins)
	return m, nil
}

// ErrNotInstalled is Remove's answer for a plugin that has no pin.
var ErrNotInstalled = errors.New("no such plugin installed")

// Remove uninstalls the plugin named name: its pin, its binary and its
// cached manifests go. A running Host keeps serving it until its Rescan.
func Remove(pluginsDir, name string) error {
	if err := wire.CheckPluginName(name); err != nil {
		return err
	}
	if _, err := os.Stat(pluginsDir); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: %w in %s", name, ErrNotInstalled, pluginsDir)
	}
	unlock, err := lockDir(pluginsDir)
	if err != nil {
		return err
	}
	defer unlock()
	pins, err := ReadPins(pluginsDir)
	if err != nil {
		return err
	}
	if _, ok := pins[name]; !ok {
		return fmt.Errorf("%s: %w in %s", name, ErrNotInstalled, pluginsDir)
	}
	delete(pins, name)
	// The pin goes first: a binary without a pin is never launched.
	if err := writePins(pluginsDir, pins); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(pluginsDir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	pruneManifestCache(pluginsDir, pins)
	return nil
}

// pruneManifestCache removes cached manifests of binaries no longer pinned,
// so that rebuilding a plugin does not grow the cache forever.
func pruneManifestCache(pluginsDir string, pins map[string]Pin) {
	keep := map[string]bool{}
	for _, p := range pins {
		keep[p.SHA256] = true
	}
	entries, err := os.ReadDir(filepath.Join(pluginsDir, ManifestDir))
	if err != nil {
		return
	}
	for _, e := range entries {
		// SHA256.json, or SHA256-CONFIGHASH.json for a configured launch.
		sum, _, _ := strings.Cut(strings.TrimSuffix(e.Name(), ".json"), "-")
		if !keep[sum] {
			_ = os.Remove(filepath.Join(pluginsDir, ManifestDir, e.Name()))
		}
	}
}

// copyHashed copies src to a new executable file in dir and returns its
// path and the SHA-256 of what was written: the hash is of the copy, so a
// src changed during the copy cannot slip past the pin.
func copyHashed(dir, src string) (string, []byte, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", nil, err
	}
	defer in.Close()
	out, err := os.CreateTemp(dir, ".install-*")
	if err != nil {
		return "", nil, err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, h), in)
	if err == nil {
		err = out.Chmod(0o755)
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out.Name())
		return "", nil, err
	}
	return out.Name(), h.Sum(nil), nil
}

// lockDir takes an exclusive lock on dir's lock file for the duration of an
// install.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// Unpinned lists the regular files of pluginsDir that look like plugin
// binaries (executable, not hidden) but are not pinned: they are never
// launched. `weir plugin ls` shows them so a user sees what to install.
func Unpinned(pluginsDir string) ([]string, error) {
	pins, err := ReadPins(pluginsDir)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(pluginsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if name == PinsFile || name[0] == '.' || !e.Type().IsRegular() {
			continue
		}
		if _, ok := pins[name]; ok {
			continue
		}
		if info, err := e.Info(); err == nil && info.Mode()&0o111 != 0 {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

func encodeSum(b []byte) string { return hex.EncodeToString(b) }
