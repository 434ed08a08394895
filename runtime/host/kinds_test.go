package host

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

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
		KindChecksum: wire.KindChecksum, KindUnknown: wire.KindUnknown, KindNotSent: wire.KindNotSent,
	}
	if len(pairs) != 12 {
		t.Fatalf("%d distinct kinds, want 12", len(pairs))
	}
	for k, w := range pairs {
		if string(k) != w {
			t.Errorf("engine kind %q, protocol kind %q", k, w)
		}
	}
}

// TestRevisionTwoKinds: "unknown" and "not_sent" pass from a plugin of
// protocol revision 2 with their code, and are a protocol violation from
// a revision-1 plugin, which cannot mean them; a retry-after stays the
// retryable kind's alone.
func TestRevisionTwoKinds(t *testing.T) {
	t.Parallel()
	ts := &toolState{m: ToolManifest{Name: "p.tool"}, plugin: &pluginState{name: "p"}}
	h := &Host{}
	for _, kind := range []string{wire.KindUnknown, wire.KindNotSent} {
		te := h.resultError(context.Background(), ts, 2, &wire.ToolError{Kind: kind, Message: "lost", Code: "E_X"})
		if string(te.Kind) != kind || te.Code != "E_X" || te.Message != "lost" || !te.Retryable() {
			t.Errorf("revision 2, %s: %+v", kind, te)
		}
		if te := h.resultError(context.Background(), ts, 1, &wire.ToolError{Kind: kind, Message: "lost"}); te.Kind != KindProtocol {
			t.Errorf("revision 1, %s: %+v, want %s", kind, te, KindProtocol)
		}
		te = h.resultError(context.Background(), ts, 2, &wire.ToolError{Kind: kind, Message: "lost", RetryAfter: durationpb.New(time.Second)})
		if te.Kind != KindProtocol {
			t.Errorf("revision 2, %s with a retry-after: %+v, want %s", kind, te, KindProtocol)
		}
	}
}
