package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
)

// Files that do not pass the checks are refused in the error shape of
// every refusal (code, message, class), with every diagnostic beside it,
// on registration and on a check alike; nothing is registered.
func TestRegisterRefusalIsAnError(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	broken := `flow(name = "broken", nodes = [task("a", tool = "testkit.echo", next = "nowhere")])`
	long := strings.Repeat("d/", 2000) + "broken.star" // a path of 4 KB, quoted back cut
	tests := []struct {
		name, path, file string
		msg              string // a substring of the message
	}{
		{"register", "/v1/flows", "broken.star", "the first broken.star:1:"},
		{"check", "/v1/flows/check", "broken.star", "E_UNKNOWN_NODE"},
		{"register, a long path", "/v1/flows", long, "bytes in all"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := b.send(t, local, "POST", tt.path, apitypes.RegisterRequest{Files: []apitypes.SourceFile{{Path: tt.file, Src: broken}}})
			if a.status != http.StatusUnprocessableEntity {
				t.Fatalf("status %d: %s", a.status, a.body)
			}
			var r apitypes.RegisterRefusal
			if err := DecodeStrict(a.body, &r); err != nil {
				t.Fatalf("not a RegisterRefusal: %v: %s", err, a.body)
			}
			if r.Code != apitypes.CodeFlowInvalid || r.Class != apitypes.ClassProtocol || !strings.Contains(r.Message, tt.msg) {
				t.Errorf("refusal %s %s %q, want %s protocol and a message with %q", r.Code, r.Class, r.Message, apitypes.CodeFlowInvalid, tt.msg)
			}
			if len(r.Message) > 1024 {
				t.Errorf("the message is %d bytes: the caller's text is not cut", len(r.Message))
			}
			if len(r.Diagnostics) != 1 || r.Diagnostics[0].Code != "E_UNKNOWN_NODE" || r.Diagnostics[0].File != tt.file {
				t.Errorf("diagnostics %+v", r.Diagnostics)
			}
		})
	}
	if a := b.send(t, local, "GET", "/v1/flows/broken", nil); a.status != http.StatusNotFound {
		t.Errorf("a refused flow was registered: %d %s", a.status, a.body)
	}
}
