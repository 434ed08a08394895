package hooks

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestHookCheck(t *testing.T) {
	t.Parallel()
	ok := func() Hook {
		return Hook{Name: "github", Secret: []byte("s"), Scheme: GitHub, Event: "github.push", IDHeader: "X-GitHub-Delivery"}
	}
	if ps := (&Hook{Name: "h", Secret: []byte("s"), Scheme: Stripe, Tolerance: time.Minute, Event: "e", IDKey: "/id"}).Check(); ps != nil {
		t.Fatalf("a good stripe hook: %q", ps)
	}
	tests := []struct {
		name   string
		change func(*Hook)
		says   string
	}{
		{"good", func(*Hook) {}, ""},
		{"bad name", func(h *Hook) { h.Name = "git/hub" }, "hook name"},
		{"misspelt scheme", func(h *Hook) { h.Scheme = "githbu" }, `did you mean "github"?`},
		{"no secret", func(h *Hook) { h.Secret = nil }, "secret is empty"},
		{"huge secret", func(h *Hook) { h.Secret = make([]byte, MaxSecretBytes+1) }, "at most 4096"},
		{"tolerance without timestamp", func(h *Hook) { h.Tolerance = time.Minute }, "carry no timestamp"},
		{"header of another scheme", func(h *Hook) { h.SignatureHeader = "X-Sig" }, "applies to signature = \"hmac-sha256\" only"},
		{"bad event", func(h *Hook) { h.Event = "" }, "event name"},
		{"bad event header", func(h *Hook) { h.EventHeader = "X Event" }, "not an HTTP header name"},
		{"no id", func(h *Hook) { h.IDHeader = "" }, "exactly one of id_header"},
		{"two ids", func(h *Hook) { h.IDKey = "/id" }, "exactly one of id_header"},
		{"id of the whole body", func(h *Hook) { h.IDHeader = ""; h.IDKey = "" }, "exactly one"},
		{"bad key", func(h *Hook) { h.Key = "repository" }, "must start with /"},
		{"small body", func(h *Hook) { h.MaxBody = 10 }, "max_body 10"},
		{"large body", func(h *Hook) { h.MaxBody = MaxBody + 1 }, "max_body"},
	}
	for _, tt := range tests {
		h := ok()
		tt.change(&h)
		ps := h.Check()
		switch {
		case tt.says == "" && ps != nil:
			t.Errorf("%s: %q", tt.name, ps)
		case tt.says != "" && (len(ps) != 1 || !strings.Contains(ps[0].Message, tt.says) || ps[0].Key == ""):
			t.Errorf("%s: %q, want one problem saying %q", tt.name, ps, tt.says)
		}
	}
	stripe := Hook{Name: "s", Secret: []byte("s"), Scheme: Stripe, Event: "e", IDKey: "/id", Tolerance: 500 * time.Millisecond}
	if ps := stripe.Check(); len(ps) != 1 || ps[0].Key != "tolerance" || !strings.Contains(ps[0].Message, "outside 1s to 24h0m0s") {
		t.Errorf("a tolerance under a second: %q", ps)
	}
}

// RFC 6901's examples, on its example document.
func TestPointer(t *testing.T) {
	t.Parallel()
	doc, err := decodeDoc([]byte(`{"foo":["bar","baz"],"":0,"a/b":1,"c%d":2,"e^f":3,"g|h":4,"i\\j":5,"k\"l":6," ":7,"m~n":8,"n":{"o":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{
		"/foo/0": "bar", "/foo/1": "baz", "/": "0", "/a~1b": "1", "/c%d": "2", "/e^f": "3",
		"/g|h": "4", "/i\\j": "5", "/k\"l": "6", "/ ": "7", "/m~0n": "8",
	} {
		toks, err := ParsePointer(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if got, err := scalarAt(doc, toks); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", p, got, err, want)
		}
	}
	for p, want := range map[string]string{"/foo": "an array", "/n/o": "a boolean", "/n": "an object", "/foo/2": "no value",
		"/foo/01": "no value", "/foo/-": "no value", "/nope/x": "no value", "/foo/0/x": "no value"} {
		toks, _ := ParsePointer(p)
		if _, err := scalarAt(doc, toks); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", p, err, want)
		}
	}
	for _, bad := range []string{"foo", "/a~2", "/a~"} {
		if _, err := ParsePointer(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if toks, err := ParsePointer(""); err != nil || toks != nil {
		t.Errorf(`"": %q %v`, toks, err)
	}
	if _, err := scalarAt(doc, nil); fmt.Sprint(err) != "an object, not a string or number" || errors.Is(err, errNoValue) {
		t.Errorf("the whole document: %v", err)
	}
}
