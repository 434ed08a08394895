package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/weirhq/weir/bench/internal/limits"
	"github.com/weirhq/weir/internal/llmtest"
	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/badgerstore"
)

const (
	agentSystem = "You answer in one word."
	agentPrompt = "Say done."
	// agentTurns is how many one-turn agent runs (and direct calls) are
	// timed, in rounds of agentRound alternating the two sides.
	agentTurns = 300
	agentRound = 25
	// agentMaxTokens is the turn's output bound, the same on both sides.
	agentMaxTokens = 64
)

var agentFlow = fmt.Sprintf(`
flow(name = "one_turn", nodes = [
    agent("a", model = "small", system = %q, prompt = %q, max_turns = 1, max_tokens = %d),
])
`, agentSystem, agentPrompt, agentMaxTokens)

// agentTurn is scenario 9: one model turn through weir beside the same
// turn asked directly with the provider's SDK, both streamed from one
// scripted OpenAI-compatible server on loopback that answers at once
// (zero think time), so the difference is weir's own cost.
//
// Through weir, one turn is a one-turn agent run's time from the turn
// being asked to its agent node completed, both stamped by the daemon:
// the call through the engine's tool-call path, the plugin host, the llm
// plugin and the SDK, and the turn journaled before the node completes
// (one durable commit). Runs go one at a time; the run's own overhead
// (admission, lease, finish) is the second row.
// Directly, it is openai-go's streaming call with the same messages and
// max_tokens, read to its end, one at a time. The target allows weir
// 1.2x the direct time plus one commit: the median latency of a
// one-writer Store.Update on the same disk, measured in the same run.
func agentTurn(b *bench) ([]row, error) {
	srv, err := startScript(llmtest.Script{Steps: []llmtest.Step{{Text: "done"}}, Loop: true})
	if err != nil {
		return nil, err
	}
	defer srv.Close()

	dir, err := b.dir("agent-config")
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "weir.hcl")
	hcl := fmt.Sprintf(`plugin "llm" {
  providers = { local = { kind = "openai", base_url = %q } }
  models = { small = { provider = "local", model = "scripted", input_cost = 1, output_cost = 1, max_tokens = %d } }
}
`, srv.OpenAIBaseURL(), agentMaxTokens)
	if err := os.WriteFile(cfg, []byte(hcl), 0o600); err != nil {
		return nil, err
	}
	d, err := b.startDaemon("agent", "--config", cfg)
	if err != nil {
		return nil, err
	}
	defer d.Kill()
	if err := b.register(d, "agent", agentFlow); err != nil {
		return nil, err
	}
	c := d.Client()

	direct := openai.NewClient(option.WithBaseURL(srv.OpenAIBaseURL()), option.WithAPIKey("bench"), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{
		Model:               "scripted",
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(agentSystem), openai.UserMessage(agentPrompt)},
		MaxCompletionTokens: openai.Int(agentMaxTokens),
		StreamOptions:       openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	var runs []string
	n := 0
	sides := []limits.Side{
		{Name: "weir", Call: func(ctx context.Context) error {
			n++
			res, err := c.RunStart(ctx, apitypes.StartRequest{Flow: "one_turn", RequestID: fmt.Sprintf("turn-%d", n), Input: json.RawMessage(`{}`)})
			if err != nil {
				return err
			}
			v, err := c.RunWait(ctx, res.RunID, client.RunWaitParams{})
			if err != nil {
				return err
			}
			if v.Phase != "completed" {
				return fmt.Errorf("run %s ended %s: %+v", res.RunID, v.Phase, v.Error)
			}
			runs = append(runs, res.RunID)
			return nil
		}},
		{Name: "direct", Call: func(ctx context.Context) error {
			stream := direct.Chat.Completions.NewStreaming(ctx, params)
			defer stream.Close()
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				return err
			}
			if len(acc.Choices) == 0 || acc.Choices[0].Message.Content != "done" {
				return fmt.Errorf("direct call answered %+v", acc.Choices)
			}
			return nil
		}},
	}
	timed, err := limits.Alternate(b.ctx, 1, agentTurns, agentRound, sides...)
	if err != nil {
		return nil, err
	}
	turns, err := turnTimes(b.ctx, c, runs)
	if err != nil {
		return nil, err
	}
	commit, err := b.commitLatency()
	if err != nil {
		return nil, err
	}
	weirP50, directP50 := turns[len(turns)/2], timed["direct"].Quantile(0.5)
	allowed := time.Duration(1.2*float64(directP50)) + commit
	fmt.Fprintf(b.log, "  %d turns: through weir p50 %v, direct p50 %v, one-writer commit p50 %v; run start→terminal p50 %v\n",
		len(turns), weirP50, directP50, commit, timed["weir"].Quantile(0.5))
	return []row{
		{figure: "one agent turn through weir (asked → turn journaled, node completed), scripted OpenAI server, zero think time, p50",
			value: dur(weirP50), limit: "same turn with openai-go directly " + dur(directP50),
			ratio:  ratio(float64(weirP50) / float64(directP50)),
			target: verdict("≤ 1.2x direct + one commit ("+dur(commit)+") = "+dur(allowed), weirP50 <= allowed)},
		{figure: "same, whole run: start request → terminal seen (the client holds GET /v1/runs/{id}?wait=), p50", value: dur(timed["weir"].Quantile(0.5)),
			limit: "direct " + dur(directP50), ratio: ratio(float64(timed["weir"].Quantile(0.5)) / float64(directP50))},
	}, nil
}

// turnTimes returns, sorted, each run's time from its model turn being
// asked (the agent_turn event's asked_at) to its agent node completed,
// from the daemon's own stamps.
func turnTimes(ctx context.Context, c *client.Client, runs []string) ([]time.Duration, error) {
	out := make([]time.Duration, 0, len(runs))
	for _, id := range runs {
		evs, err := client.Collect(c.RunEventsAll(ctx, id, client.EventListParams{}))
		if err != nil {
			return nil, err
		}
		var asked, done time.Time
		for _, ev := range evs {
			switch {
			case ev.Type == "agent_turn":
				s, _ := ev.Detail["asked_at"].(string)
				if asked, err = time.Parse(time.RFC3339Nano, s); err != nil {
					return nil, fmt.Errorf("run %s: agent_turn's asked_at %q: %v", id, s, err)
				}
			case ev.Type == "node_completed" && ev.Node == "a":
				done = ev.At
			}
		}
		if asked.IsZero() || done.IsZero() {
			return nil, fmt.Errorf("run %s: no agent_turn or node_completed event", id)
		}
		out = append(out, done.Sub(asked))
	}
	slices.Sort(out)
	return out, nil
}

// commitLatency is the median latency of a one-writer Store.Update (one
// small key, synced) on the bench's disk: one durable commit alone.
func (b *bench) commitLatency() (time.Duration, error) {
	return once(b, "one-writer commit latency", func() (time.Duration, error) {
		dir, err := b.dir("commit-latency")
		if err != nil {
			return 0, err
		}
		s, err := badgerstore.Open(dir, badgerstore.Options{})
		if err != nil {
			return 0, err
		}
		defer s.Close()
		i := 0
		calls, err := limits.Measure(b.ctx, 1, 500, func(ctx context.Context) error {
			i++
			key := fmt.Sprint("k", i)
			return s.Update(ctx, func(tx store.Tx) error { return tx.MetaPut(key, []byte("v")) })
		})
		if err != nil {
			return 0, err
		}
		return calls.Quantile(0.5), nil
	})
}

// startScript serves s as a scripted OpenAI- and Anthropic-compatible
// model on loopback.
func startScript(s llmtest.Script) (*llmtest.Server, error) {
	srv := llmtest.NewScript(s)
	if err := srv.Start("127.0.0.1:0"); err != nil {
		return nil, err
	}
	return srv, nil
}
