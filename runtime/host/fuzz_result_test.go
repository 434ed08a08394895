package host

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weirhq/weir/sdk/wire"
)

// FuzzCallResult feeds the host what an untrusted plugin may answer to a
// call, as bytes on the wire: whatever it sends, the host never panics, a
// success carries JSON output and a cost that is not negative, and a
// failure is a *ToolError whose kind says what the plugin reported or that
// it broke the protocol.
func FuzzCallResult(f *testing.F) {
	seed := func(r *wire.CallResult) {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, int64(3))
	}
	seed(&wire.CallResult{Output: []byte(`{"ok":true}`)})
	seed(&wire.CallResult{Output: []byte(`{"ok":true}`), HasCost: true, Cost: 7})
	seed(&wire.CallResult{Output: []byte(`[1,2`), HasCost: true, Cost: -1})
	seed(&wire.CallResult{Error: &wire.ToolError{Kind: wire.KindRetryable, Message: "later"}})
	seed(&wire.CallResult{Error: &wire.ToolError{Kind: wire.KindCancelled, Message: "stopped"}, ProgressSent: 1 << 40})
	seed(&wire.CallResult{Error: &wire.ToolError{Kind: "explode", Message: "?"}})
	seed(&wire.CallResult{Error: &wire.ToolError{Kind: wire.KindUnknown, Message: "connection lost", Code: "E_MCP_SERVER_GONE"}})
	seed(&wire.CallResult{Error: &wire.ToolError{Kind: wire.KindNotSent, Message: "server down", RetryAfter: durationpb.New(time.Second)}})
	seed(&wire.CallResult{Error: &wire.ToolError{Kind: wire.KindRetryable, Message: "slow down", Code: "E_MODEL_RATE", RetryAfter: durationpb.New(20 * time.Second)}})
	seed(&wire.CallResult{Error: &wire.ToolError{Kind: wire.KindPermanent, Message: "no", Code: "e-lower"}})
	seed(&wire.CallResult{Error: &wire.ToolError{Kind: wire.KindPermanent, Message: "no", RetryAfter: durationpb.New(time.Second)}})
	seed(&wire.CallResult{Error: &wire.ToolError{Kind: wire.KindRetryable, Message: "later", RetryAfter: durationpb.New(-time.Second)}})
	seed(&wire.CallResult{Error: &wire.ToolError{Kind: wire.KindRetryable, Message: "later", RetryAfter: durationpb.New(wire.MaxRetryAfter + 1)}})
	f.Add([]byte{0xff, 0xff, 0xff}, int64(0))

	f.Fuzz(func(t *testing.T, data []byte, declared int64) {
		var r wire.CallResult
		if err := proto.Unmarshal(data, &r); err != nil {
			return // gRPC refuses it before the host sees it
		}
		ts := &toolState{m: ToolManifest{Name: "fz.tool", Cost: max(declared, 0)}, plugin: &pluginState{name: "fz"}}
		h := &Host{}
		res, err := h.result(context.Background(), ts, wire.ProtocolVersion, &r)
		if err != nil {
			var te *ToolError
			if !errors.As(err, &te) {
				t.Fatalf("error %T %v is not a *ToolError", err, err)
			}
			if res != nil {
				t.Fatalf("both a result and an error: %+v, %v", res, err)
			}
			want := map[string]Kind{wire.KindRetryable: KindRetryable, wire.KindPermanent: KindPermanent, wire.KindCancelled: KindCancelled,
				wire.KindUnknown: KindUnknown, wire.KindNotSent: KindNotSent}
			e := r.GetError()
			ra := e.GetRetryAfter()
			badExtra := wire.CheckErrorCode(e.GetCode()) != nil ||
				ra != nil && (ra.CheckValid() != nil || ra.AsDuration() < 0 || ra.AsDuration() > wire.MaxRetryAfter || e.GetKind() != wire.KindRetryable)
			switch {
			case e == nil:
				if te.Kind != KindProtocol {
					t.Fatalf("a success refused with kind %s, want %s: %v", te.Kind, KindProtocol, err)
				}
			case want[e.GetKind()] != "" && badExtra:
				if te.Kind != KindProtocol {
					t.Fatalf("code %q, retry-after %v on %q became %s, want %s", e.GetCode(), ra, e.GetKind(), te.Kind, KindProtocol)
				}
			case want[e.GetKind()] != "":
				if te.Code != e.GetCode() || te.RetryAfter != ra.AsDuration() {
					t.Fatalf("code %q, retry-after %v arrived as %q, %v", e.GetCode(), ra.AsDuration(), te.Code, te.RetryAfter)
				}
				if te.Kind != want[e.GetKind()] {
					t.Fatalf("plugin said %q, host says %s", e.GetKind(), te.Kind)
				}
			default:
				if te.Kind != KindProtocol {
					t.Fatalf("unknown kind %q became %s, want %s", e.GetKind(), te.Kind, KindProtocol)
				}
			}
			return
		}
		if r.GetError() != nil {
			t.Fatalf("a tool error %+v became a success", r.GetError())
		}
		if !json.Valid(res.Output) {
			t.Fatalf("accepted output that is not JSON: %q", res.Output)
		}
		if res.Cost < 0 {
			t.Fatalf("accepted a negative cost %d", res.Cost)
		}
		if res.CostReported != r.GetHasCost() || (!r.GetHasCost() && res.Cost != ts.m.Cost) {
			t.Fatalf("cost %d (reported %v) from has_cost %v cost %d, declared %d", res.Cost, res.CostReported, r.GetHasCost(), r.GetCost(), ts.m.Cost)
		}
	})
}
