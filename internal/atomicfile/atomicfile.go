// Package atomicfile writes small files so that a reader sees the old
// content or the new one, never a torn file, and the new one survives a
// crash once the write returns. The plugin host's pins and manifest cache
// use it; the implementation is sdk/dedupe's, which the plugins (first-party
// and vendors', built against the sdk module alone) use for their state, so
// host and plugins share one.
package atomicfile

import (
	"os"

	"github.com/weirhq/weir/sdk/dedupe"
)

// Write replaces path with data: a temporary file in the same directory,
// synced, renamed over path, then the directory synced.
func Write(path string, data []byte, perm os.FileMode) error {
	return dedupe.WriteFileAtomic(path, data, perm)
}
