package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/llmtest"
	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

const tellerFlow = `
flow(name = "teller", nodes = [
    agent("a", model = "small", prompt = "Mail ann, then tell me about the Seine", tools = ["mail.send"], approve = ["mail.send"], max_turns = 3),
])
`

// errSeenEnough ends a stream from its callback.
var errSeenEnough = errors.New("seen enough")

// TestWatchingTokensArrive: while an agent's run waits for an approval, a
// `weir run watch --tokens` and a client asking for deltas connect; the
// next turn streams its text to both while the provider is still
// streaming it; the client leaves after the first delta and connects again
// with the last message's id: it gets the rest of the turn without a
// repeat, and what both saw, in order, is the turn's journaled answer.
func TestWatchingTokensArrive(t *testing.T) {
	e2e(t, "starts a real daemon and the scripted model server")
	const said = "The Seine flows 777 km to the sea."
	hold := make(chan struct{})
	srv := llmtest.New(
		llmtest.Step{ToolCalls: []llmtest.ToolCall{mailCall("ann@example.com")}, Usage: &llmtest.Usage{InputTokens: 100, OutputTokens: 10}},
		llmtest.Step{Text: said, Hold: hold, Usage: &llmtest.Usage{InputTokens: 200, OutputTokens: 9}},
	)
	d := agentDaemon(t, srv)
	d.start("")
	d.register(tellerFlow)
	id := d.startUntilDecision("teller", "a@1.1.0")

	// The CLI watches; it has connected once it printed the run's events.
	var cliOut, cliErr testutil.Buffer
	cliDone := make(chan int, 1)
	go func() {
		m := NewMain()
		env := d.env()
		m.Env = func(k string) string { return env[k] }
		cliDone <- m.Run(context.Background(), []string{"run", "watch", id, "--tokens"}, strings.NewReader(""), &cliOut, &cliErr)
	}()
	testutil.Eventually(t, 60*time.Second, func() error {
		if !strings.Contains(cliOut.String(), "approval_asked") {
			return fmt.Errorf("weir run watch printed %q so far (%s)", cliOut.String(), cliErr.String())
		}
		return nil
	})

	// The client watches, and approves once its stream is there; it
	// leaves after the turn's first delta, which the provider sends
	// before it holds the turn.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var first []apitypes.TurnDelta
	var lastID string
	approved := false
	err := d.api.RunStreamWith(ctx, id, client.RunStreamOptions{Deltas: true}, func(m client.StreamMessage) error {
		if m.ID != "" {
			lastID = m.ID
		}
		switch {
		case m.Name == apitypes.StreamRun && !approved:
			approved = true
			if code, out, errb := d.cli("run", "approve", id, "a@1.1.0"); code != 0 {
				return fmt.Errorf("approve: %d %s %s", code, out, errb)
			}
		case m.Delta != nil:
			first = append(first, *m.Delta)
			return errSeenEnough
		case m.Name == apitypes.StreamEnd:
			return errors.New("the run ended before its turn's text was seen")
		}
		return nil
	})
	if !errors.Is(err, errSeenEnough) {
		t.Fatal(err)
	}
	if len(first) != 1 || first[0].Node != "a" || first[0].Visit != 1 || first[0].Turn != 2 || first[0].Seq != 1 || first[0].Offset != 0 || first[0].Text != "The " {
		t.Fatalf("the first delta seen %+v, want turn a@1.2's first word while the provider holds the turn", first)
	}
	if !strings.HasSuffix(lastID, "/a@1.2/4") {
		t.Fatalf("the delta's id %q does not say where in the turn the stream was", lastID)
	}

	// Connected again from there: the rest, once the provider goes on,
	// and no event seen before.
	seqText, _, _ := strings.Cut(lastID, "/")
	seenSeq, err := strconv.ParseUint(seqText, 10, 64)
	if err != nil {
		t.Fatalf("the delta's id %q: %v", lastID, err)
	}
	var rest []apitypes.TurnDelta
	released := false
	err = d.api.RunStreamWith(ctx, id, client.RunStreamOptions{Deltas: true, Node: "a", After: lastID}, func(m client.StreamMessage) error {
		switch {
		case m.Name == apitypes.StreamRun && !released:
			released = true
			close(hold)
		case m.Delta != nil:
			rest = append(rest, *m.Delta)
		case m.Event != nil && m.Event.Seq <= seenSeq:
			return fmt.Errorf("event %d sent again after %s", m.Event.Seq, lastID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for i, dl := range append(first, rest...) {
		if dl.Seq != uint64(i+1) || dl.Offset != text.Len() || dl.Turn != 2 {
			t.Fatalf("delta %d is %+v after %q: want seq %d at offset %d of turn 2, no repeat, no gap", i, dl, text.String(), i+1, text.Len())
		}
		text.WriteString(dl.Text)
	}
	v := d.waitTerminal(id)
	if o := agentResult(t, v); o.Answer != said || text.String() != said {
		t.Fatalf("the watchers saw %q; the journaled answer is %q, the provider said %q", text.String(), o.Answer, said)
	}
	if len(rest) < 2 {
		t.Fatalf("%d deltas after the first: want the provider's words one by one", len(rest))
	}

	select {
	case code := <-cliDone:
		out := cliOut.String()
		if code != 0 || !strings.Contains(out, "a@1 turn 2:\n"+said+"\n") || !strings.Contains(out, id+" completed") {
			t.Fatalf("weir run watch --tokens: exit %d\n%s\n%s", code, out, cliErr.String())
		}
	case <-ctx.Done():
		t.Fatalf("weir run watch did not end with the run: %s", cliOut.String())
	}
	d.stop()
}
