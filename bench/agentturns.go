package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/weirhq/weir/internal/llmtest"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/host"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/badgerstore"
	"github.com/weirhq/weir/runtime/store/storecount"
	"github.com/weirhq/weir/runtime/tool"
)

// heldWait bounds the wait for the long agent's last call.
const heldWait = 2 * time.Minute

// longAgentTurns is how many turns the long agent of scenario 18 runs:
// the most an agent may (max_turns), each but the last asking for one
// testkit.echo call.
const longAgentTurns = 100

var longAgentFlow = fmt.Sprintf(`
flow(name = "long_agent", nodes = [
    agent("a", model = "small", prompt = "Echo each key once.", tools = ["testkit.echo"], max_turns = %d),
])
`, longAgentTurns)

// agentTurnCost is scenario 18: what a turn of a 100-turn agent costs
// the store — the bytes its record holds and the reads the engine makes
// from asking it to asking the next (journaling it, running its call, the
// call's end waking the agent, the agent's step) — at turn 1 beside turn
// 99, the last that asks for a call; then what a process that recovers
// the agent after a crash at turn 99 reads of its journal. The engine runs
// in this process on Badger, its store wrapped to count reads
// (storecount), with the real plugin host: the llm plugin asking a
// scripted OpenAI-compatible server, and testkit. The target is flat:
// turn 99 costs what turn 1 does, within a few records.
func agentTurnCost(b *bench) ([]row, error) {
	steps := make([]llmtest.Step, 0, longAgentTurns)
	for i := 1; i < longAgentTurns; i++ {
		steps = append(steps, llmtest.Step{ToolCalls: []llmtest.ToolCall{{Name: "testkit.echo", Arguments: json.RawMessage(fmt.Sprintf(`{"key":"k%d"}`, i))}}})
	}
	steps = append(steps, llmtest.Step{Text: "done"})
	srv, err := startScript(llmtest.Script{Steps: steps})
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	dir, err := b.dir("agent-turns")
	if err != nil {
		return nil, err
	}
	p, err := openLongAgent(b, dir, srv.OpenAIBaseURL(), hclog.NewNullLogger()) // its errors after the crash are the crash's
	if err != nil {
		return nil, err
	}
	res, err := p.eng.Submit(b.ctx, engine.StartRequest{Owner: "bench", Flow: "long_agent", Input: json.RawMessage(`{}`)})
	if err != nil {
		p.close(false)
		return nil, err
	}
	// The crash: once turn 99 is journaled and its call is running, the
	// store closes under the engine, as a kill -9 leaves it.
	if err := p.heldAt(b.ctx, res.RunID, longAgentTurns-1); err != nil {
		p.close(false)
		return nil, err
	}
	perTurn, took := p.tools.perTurn()
	p.close(true)

	start := time.Now()
	p2, err := openLongAgent(b, dir, srv.OpenAIBaseURL(), hclog.New(&hclog.LoggerOptions{Name: "agent-turns", Output: b.log, Level: hclog.Warn}))
	if err != nil {
		return nil, err
	}
	defer p2.close(false)
	run, err := awaitTerminal(b.ctx, p2.eng, res.RunID)
	if err != nil {
		return nil, err
	}
	recovered := time.Since(start)
	if run.Phase != store.PhaseCompleted {
		return nil, fmt.Errorf("run %s ended %s: %+v", run.ID, run.Phase, run.Error)
	}
	listed := p2.cs.Reads()["AgentTurnList"]
	var turns []*store.AgentTurn
	if err := p2.cs.View(b.ctx, func(tx store.Tx) error {
		var err error
		turns, err = tx.AgentTurnList(store.AgentTurnListParams{RunID: run.ID, Node: "a", Visit: 1})
		return err
	}); err != nil {
		return nil, err
	}
	if len(turns) != longAgentTurns || len(perTurn) < longAgentTurns-2 {
		return nil, fmt.Errorf("%d turns journaled and %d counted, want %d", len(turns), len(perTurn), longAgentTurns)
	}
	size := func(t *store.AgentTurn) int { raw, _ := json.Marshal(t); return len(raw) }
	last := longAgentTurns - 1
	first, end := perTurn[0], perTurn[last-2] // turn 98's reads, the last whole one before the crash
	bytes1, bytesLast := size(turns[0]), size(turns[last-1])
	fmt.Fprintf(b.log, "  reads per turn, turn by turn: %v\n", recordsOf(perTurn))
	cutN, cutReserved := cutOf(turns)
	return []row{
		{figure: fmt.Sprintf("%d-turn agent: stored bytes of turn %d's record", longAgentTurns, last), value: fmt.Sprintf("%d B", bytesLast),
			limit: fmt.Sprintf("turn 1's %d B", bytes1), ratio: ratio(float64(bytesLast) / float64(bytes1)),
			target: verdict("flat (≤ 1.1x)", float64(bytesLast) <= 1.1*float64(bytes1))},
		{figure: fmt.Sprintf("same: store reads from asking turn %d to asking the next (reads / records)", last-1), value: fmt.Sprintf("%d / %d", end.Calls, end.Records),
			limit: fmt.Sprintf("turn 1's %d / %d", first.Calls, first.Records), ratio: ratio(float64(end.Records) / float64(first.Records)),
			target: verdict("flat (≤ turn 1's records + 6)", end.Records <= first.Records+6)},
		{figure: fmt.Sprintf("same: time from asking turn %d to asking the next (median of 3 turns around it), the request grown to %d B", last-1, turns[last-2].RequestBytes),
			value: dur(median3(took, last-2)), limit: fmt.Sprintf("turn 3's %s (once the plugins run), its request %d B", dur(median3(took, 2)), turns[2].RequestBytes),
			ratio: ratio(float64(median3(took, last-2)) / float64(median3(took, 2)))},
		{figure: fmt.Sprintf("same, killed at turn %d: recovery's reads of the journal (listings / turns read), open → run completed", last), value: fmt.Sprintf("%d / %d", listed.Calls, listed.Records),
			limit: "took " + dur(recovered), target: verdict("one listing", listed.Calls == 1 && listed.Records == int64(last))},
		{figure: "same: what the kill may have made the provider bill unseen, as the turns report it (asks cut off, at most their reservations)",
			value: fmt.Sprintf("%d cut, ≤ %d", cutN, cutReserved), limit: fmt.Sprintf("1 kill, turn %d reserved %d", longAgentTurns, turns[longAgentTurns-1].Reserved),
			target: verdict("≤ one reservation per kill", cutN <= 1 && cutReserved <= turns[longAgentTurns-1].Reserved)},
	}, nil
}

// cutOf sums what the turns say crashes may have cut off: asks, and their
// reservations.
func cutOf(turns []*store.AgentTurn) (int, int64) {
	var n int
	var reserved int64
	for _, t := range turns {
		n += t.Cut
		reserved += t.CutReserved
	}
	return n, reserved
}

// longAgent is an engine over a counted Badger store and the plugin host.
type longAgent struct {
	st    store.Store
	cs    *storecount.Store
	h     *host.Host
	tools *turnCounter
	eng   *engine.Engine
}

func openLongAgent(b *bench, dir, baseURL string, logger hclog.Logger) (*longAgent, error) {
	st, err := badgerstore.Open(filepath.Join(dir, "store"), badgerstore.Options{})
	if err != nil {
		return nil, err
	}
	llm := fmt.Sprintf(`{"providers": {"local": {"kind": "openai", "base_url": %q}},
  "models": {"small": {"provider": "local", "model": "scripted", "input_cost": 1, "output_cost": 1, "max_tokens": 64}}}`, baseURL)
	h, err := host.New(host.Config{PluginsDir: b.plugins, DataDir: dir, Logger: hclog.NewNullLogger(),
		PluginConfig: map[string]json.RawMessage{"llm": json.RawMessage(llm)}})
	if err != nil {
		st.Close()
		return nil, err
	}
	p := &longAgent{st: st, cs: storecount.New(st), h: h}
	p.tools = &turnCounter{Host: h, cs: p.cs, held: make(chan struct{})}
	if p.eng, err = engine.Open(engine.Config{Store: p.cs, Tools: p.tools, Logger: logger}); err == nil {
		_, err = p.eng.Register(b.ctx, []engine.SourceFile{{Path: "long.star", Src: longAgentFlow}})
	}
	if err == nil {
		err = p.eng.Start(b.ctx)
	}
	if err != nil {
		p.close(false)
		return nil, err
	}
	return p, nil
}

// close stops the engine and closes the host and the store; crash closes
// the store first, so nothing the engine does afterwards reaches it.
func (p *longAgent) close(crash bool) {
	if crash {
		p.st.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if crash {
		cancel()
	}
	if p.eng != nil {
		p.eng.Stop(ctx)
	}
	cancel()
	p.h.Close()
	if !crash {
		p.st.Close()
	}
}

// turnCounter is the plugin host with the store's read count taken as
// each model turn is asked; holdAt holds the call of turn n until the
// call's context ends.
type turnCounter struct {
	*host.Host
	cs     *storecount.Store
	mu     sync.Mutex
	at     []storecount.Count
	times  []time.Time
	holdAt int
	held   chan struct{}
}

func (t *turnCounter) Call(ctx context.Context, req tool.CallRequest) (*tool.CallResult, error) {
	t.mu.Lock()
	if req.Tool == "testkit.echo" && t.holdAt > 0 && len(t.at) >= t.holdAt {
		t.mu.Unlock()
		close(t.held)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if req.Tool != "testkit.echo" {
		t.at = append(t.at, t.cs.Total())
		t.times = append(t.times, time.Now())
	}
	t.mu.Unlock()
	return t.Host.Call(ctx, req)
}

// heldAt sets the turn whose call is held and waits until it is, or
// until the run ends without reaching it.
func (p *longAgent) heldAt(ctx context.Context, id string, n int) error {
	t := p.tools
	t.mu.Lock()
	t.holdAt = n
	t.mu.Unlock()
	var ended *store.Run
	err := p.eng.AwaitRun(ctx, "bench", id, heldWait, engine.AwaitElsewhere, func(_ context.Context, run *store.Run) (bool, error) {
		select {
		case <-t.held:
			return true, nil
		default:
		}
		if run.Phase.Terminal() {
			ended = run
			return true, nil
		}
		return false, nil
	})
	switch {
	case err != nil:
		return err
	case ended != nil:
		return fmt.Errorf("run %s ended %s before turn %d's call: %+v", id, ended.Phase, n, ended.Error)
	}
	select {
	case <-t.held:
		return nil
	default:
		run, err := p.eng.Get(ctx, "bench", id)
		if err != nil {
			return err
		}
		evs, _ := p.eng.Events(ctx, "bench", id, 0, 0)
		for _, ev := range evs[max(0, len(evs)-8):] {
			fmt.Fprintf(os.Stderr, "  event %s %s %s\n", ev.Type, ev.Node, ev.Detail)
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		return fmt.Errorf("the long agent never reached turn %d's call: %d turns asked, the run %s", n, len(t.at), run.Phase)
	}
}

// perTurn is the reads, and the time, between one model turn being asked
// and the next.
func (t *turnCounter) perTurn() ([]storecount.Count, []time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var per []storecount.Count
	var took []time.Duration
	for k := 1; k < len(t.at); k++ {
		per = append(per, t.at[k].Sub(t.at[k-1]))
		took = append(took, t.times[k].Sub(t.times[k-1]))
	}
	return per, took
}

// median3 is the median of the three durations around ds[i], which one
// slow commit on a shared disk moves less than it moves one.
func median3(ds []time.Duration, i int) time.Duration {
	w := slices.Clone(ds[max(0, i-1):min(len(ds), i+2)])
	slices.Sort(w)
	return w[len(w)/2]
}

func recordsOf(cs []storecount.Count) []int64 {
	out := make([]int64, len(cs))
	for i, c := range cs {
		out[i] = c.Records
	}
	return out
}

// awaitTerminal waits for run id to end.
func awaitTerminal(ctx context.Context, eng *engine.Engine, id string) (*store.Run, error) {
	var last *store.Run
	err := eng.AwaitRun(ctx, "bench", id, 5*time.Minute, engine.AwaitEnd, func(_ context.Context, run *store.Run) (bool, error) {
		last = run
		return run.Phase.Terminal(), nil
	})
	if err == nil && (last == nil || !last.Phase.Terminal()) {
		err = fmt.Errorf("run %s did not end in 5 minutes", id)
	}
	return last, err
}
