package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/plugins/internal/plugintest"
	"github.com/weirhq/weir/runtime/host"
	"github.com/weirhq/weir/runtime/tool"
)

func TestMain(m *testing.M) { testutil.Main(m, testutil.Plugins("mail")) }

func readOutbox(t *testing.T, p *plugintest.Plugin) []message {
	t.Helper()
	f, err := os.Open(filepath.Join(p.StateDir, OutboxFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []message
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("outbox line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func TestSendAppendsOneLine(t *testing.T) {
	t.Parallel()
	p := plugintest.Start(t, "mail", `{"from":"bot@weir.example"}`)
	var res struct{ ID string }
	p.MustCall(t, "mail.send", `{"to":"ada@example.com","subject":"Hi","body":"Hello, Ada."}`, "k1", &res)
	p.MustCall(t, "mail.send", `{"to":"bob@example.com","body":"no subject"}`, "k2", nil)
	got := readOutbox(t, p)
	if len(got) != 2 {
		t.Fatalf("%d lines in the outbox, want 2", len(got))
	}
	m := got[0]
	if m.ID != res.ID || m.To != "ada@example.com" || m.Subject != "Hi" || m.Body != "Hello, Ada." ||
		m.From != "bot@weir.example" || m.IdempotencyKey != "k1" || m.Attempt != 1 || m.SentAt.IsZero() {
		t.Fatalf("outbox line %+v (answered id %q)", m, res.ID)
	}
	if got[1].Subject != "" || got[1].To != "bob@example.com" {
		t.Fatalf("second line %+v", got[1])
	}
}

func TestSendIsDeclaredAtMostOnce(t *testing.T) {
	t.Parallel()
	p := plugintest.Start(t, "mail", "")
	info, ok := p.Host.LookupTool("mail.send")
	if !ok || info.Idempotent || info.Class() != flows.EffectAtMostOnce || !info.Reconcile {
		t.Fatalf("mail.send = %+v, %v; want an at-most-once tool with a probe", info, ok)
	}
}

// TestProbeReadsTheOutbox: a key the outbox holds happened, with the
// result the call answered; any other did not.
func TestProbeReadsTheOutbox(t *testing.T) {
	t.Parallel()
	p := plugintest.Start(t, "mail", "")
	const in = `{"to":"ada@example.com","body":"x"}`
	res, err := p.Reconcile("mail.send", in, "k1")
	if err != nil || res.Answer != tool.NotHappened || res.Output != nil {
		t.Fatalf("before any mail: %+v, %v; want not happened", res, err)
	}
	var sent map[string]any
	p.MustCall(t, "mail.send", in, "k1", &sent)
	p.MustCall(t, "mail.send", in, "k2", nil)
	res, err = p.Reconcile("mail.send", in, "k1")
	if err != nil || res.Answer != tool.Happened {
		t.Fatalf("k1: %+v, %v; want happened", res, err)
	}
	var got map[string]any
	if err := json.Unmarshal(res.Output, &got); err != nil || got["id"] != sent["id"] || got["sent_at"] != sent["sent_at"] {
		t.Fatalf("k1's result %s, the call answered %v", res.Output, sent)
	}
	if res, err := p.Reconcile("mail.send", in, "k3"); err != nil || res.Answer != tool.NotHappened {
		t.Fatalf("k3: %+v, %v; want not happened", res, err)
	}
	if n := len(readOutbox(t, p)); n != 2 {
		t.Fatalf("the probe changed the outbox: %d lines, want 2", n)
	}
}

func TestBadInputIsRefusedBeforeSending(t *testing.T) {
	t.Parallel()
	p := plugintest.Start(t, "mail", "")
	for _, in := range []string{`{"to":"not-an-address","body":"x"}`, `{"body":"x"}`, `{"to":"a@b.c"}`, `{"to":"a@b.c","body":"x","cc":"d@e.f"}`} {
		plugintest.WantKind(t, p.Call("mail.send", in, "", nil), host.KindSchema)
	}
	if _, err := os.Stat(filepath.Join(p.StateDir, OutboxFile)); !os.IsNotExist(err) {
		t.Fatalf("refused input reached the outbox: %v", err)
	}
}

func TestConcurrentSendsEachLandOnce(t *testing.T) {
	t.Parallel()
	p := plugintest.Start(t, "mail", "")
	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Call("mail.send", `{"to":"ada@example.com","body":"x"}`, string(rune('a'+i)), nil); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got := readOutbox(t, p)
	ids := map[string]bool{}
	for _, m := range got {
		ids[m.ID] = true
	}
	if len(got) != n || len(ids) != n {
		t.Fatalf("%d lines, %d distinct ids; want %d of each", len(got), len(ids), n)
	}
}
