package host

import (
	"testing"

	"github.com/weirhq/weir/sdk/wire"
)

// TestKindsMatchTheProtocol: the engine's kinds (package tool, which must
// not import gRPC) and the protocol's are two spellings of one set.
func TestKindsMatchTheProtocol(t *testing.T) {
	t.Parallel()
	pairs := map[Kind]string{
		KindRetryable: wire.KindRetryable, KindPermanent: wire.KindPermanent, KindSchema: wire.KindSchema,
		KindUnknownTool: wire.KindUnknownTool, KindCrashed: wire.KindCrashed, KindDeadline: wire.KindDeadline,
		KindTooLarge: wire.KindTooLarge, KindCancelled: wire.KindCancelled, KindProtocol: wire.KindProtocol,
		KindChecksum: wire.KindChecksum,
	}
	if len(pairs) != 10 {
		t.Fatalf("%d distinct kinds, want 10", len(pairs))
	}
	for k, w := range pairs {
		if string(k) != w {
			t.Errorf("engine kind %q, protocol kind %q", k, w)
		}
	}
}
