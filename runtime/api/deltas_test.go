package api

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/engine"
)

// TestStreamPositionIDs: a message id of a run's stream reads back as the
// position it was written from; what is not one is refused.
func TestStreamPositionIDs(t *testing.T) {
	t.Parallel()
	for _, p := range []streamPosition{
		{after: 0},
		{after: 42},
		{after: 7, turn: &engine.TurnKey{Node: "a", Visit: 1, Turn: 2}, offset: 35},
		{after: 7, turn: &engine.TurnKey{Node: "we/ird@node.x", Visit: 3, Turn: 1}, offset: 0},
	} {
		got, ok := parseStreamPosition(p.String())
		if !ok || got.after != p.after || got.offset != p.offset || (got.turn == nil) != (p.turn == nil) || (p.turn != nil && *got.turn != *p.turn) {
			t.Errorf("%q read back as %+v (%v)", p.String(), got, ok)
		}
	}
	for _, bad := range []string{"", "x", "-1", "1/", "1/a@1.2", "1/a@1.2/x", "1/a1.2/3", "1/@1.2/3", "1/a@1/3", "1/a@x.2/3", "1/a@1.2/-3", "1/a@-1.2/3"} {
		if p, ok := parseStreamPosition(bad); ok {
			t.Errorf("%q read as %+v", bad, p)
		}
	}
}

// TestResumedSkipsWhatTheClientHad: kept text of the turn the client
// resumes is cut at its offset; other turns' is sent whole.
func TestResumedSkipsWhatTheClientHad(t *testing.T) {
	t.Parallel()
	key := engine.TurnKey{Node: "a", Visit: 1, Turn: 2}
	d := &deltaStream{resume: streamPosition{turn: &key, offset: 5}}
	for _, tc := range []struct {
		in       engine.TurnDelta
		want     string
		wantSent bool
	}{
		{engine.TurnDelta{TurnKey: key, Seq: 1, Offset: 0, Text: "One "}, "", false},
		{engine.TurnDelta{TurnKey: key, Seq: 2, Offset: 4, Text: "two "}, "wo ", true},
		{engine.TurnDelta{TurnKey: key, Seq: 3, Offset: 8, Text: "three"}, "three", true},
		{engine.TurnDelta{TurnKey: engine.TurnKey{Node: "b", Visit: 1, Turn: 2}, Seq: 1, Text: "One "}, "One ", true},
	} {
		got, sent := d.resumed(tc.in)
		if sent != tc.wantSent || (sent && got.Text != tc.want) || (sent && got.End() != tc.in.End()) {
			t.Errorf("%+v resumed as %+v (%v), want %q (%v)", tc.in, got, sent, tc.want, tc.wantSent)
		}
	}
}

// TestRunStreamDeltasParameters: deltas and node are checked before the
// stream starts; another owner's run answers like a missing one with
// deltas too; a run without model turns streams as before, its event ids
// plain seqs, and a client that asks for deltas reads them.
func TestRunStreamDeltasParameters(t *testing.T) {
	t.Parallel()
	b := setup(t, engine.Config{})
	id := b.start(t, alice, "echo", `{"x":1}`, "")
	for _, q := range []string{"deltas=2", "deltas=yes", "node=e", "deltas=1&node=" + strings.Repeat("n", 300), "after=3/e@1", "deltas=1&after=1/e@1.1/x"} {
		if a := b.send(t, alice, "GET", "/v1/runs/"+id+"/stream?"+q, nil); a.status != 400 || a.errorBody(t).Code != engine.CodeBadRequest {
			t.Errorf("%s: %d %s", q, a.status, a.body)
		}
	}
	if a := b.send(t, alice, "GET", "/v1/runs/"+id+"/stream?deltas=1", nil, "Last-Event-ID", "2/e@1.1/"); a.status != 400 {
		t.Errorf("a malformed Last-Event-ID: %d %s", a.status, a.body)
	}
	if a := b.send(t, bob, "GET", "/v1/runs/"+id+"/stream?deltas=1&node=e", nil); a.status != 404 {
		t.Errorf("bob streams alice's run's deltas: %d %s", a.status, a.body)
	}

	_, ac := newClients(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var events, deltas int
	err := ac.RunStreamWith(ctx, id, client.RunStreamOptions{Deltas: true, Node: "e", After: "0/e@1.1/4"}, func(m client.StreamMessage) error {
		switch m.Name {
		case apitypes.StreamEvent:
			events++
			if want := "/e@1.1/4"; m.ID != strconv.FormatUint(m.Event.Seq, 10)+want {
				return errors.New("event id " + m.ID + ": want its seq and the position the stream resumed from")
			}
		case apitypes.StreamTurnDelta:
			deltas++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if events == 0 || deltas != 0 {
		t.Fatalf("%d events and %d deltas for a run without model turns", events, deltas)
	}
	// The stream's watcher goes with it.
	testutil.Eventually(t, 30*time.Second, func() error {
		if n := engine.LiveTurns(b.eng).Runs(); n != 0 {
			return fmt.Errorf("%d runs watched after the stream ended", n)
		}
		return nil
	})
}

// FuzzStreamPosition: any id a client sends either is refused or reads
// as a position whose id reads back the same.
func FuzzStreamPosition(f *testing.F) {
	for _, s := range []string{"0", "12", "7/a@1.2/35", "7/we/ird@x@3.1/0", "1/a@1.2/", "/", "1//@.//"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, ok := parseStreamPosition(s)
		if !ok {
			return
		}
		again, ok := parseStreamPosition(p.String())
		if !ok || again.String() != p.String() {
			t.Fatalf("%q read as %q, which reads as %q (%v)", s, p.String(), again.String(), ok)
		}
	})
}
