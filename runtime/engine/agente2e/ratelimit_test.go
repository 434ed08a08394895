package agente2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/llmtest"
	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/host"
	"github.com/weirhq/weir/runtime/store"
)

// twoTurns answers a conversation without a tool result with a call of
// testkit.echo, and one with it with the final text: every agent takes
// two turns, in whatever order their turns interleave.
func twoTurns(_ string, body []byte) llmtest.Step {
	if strings.Contains(string(body), `"role":"tool"`) {
		return llmtest.Step{Text: "done", Usage: &llmtest.Usage{InputTokens: 40, OutputTokens: 4}}
	}
	return llmtest.Step{ToolCalls: []llmtest.ToolCall{{Name: "testkit__echo", Arguments: json.RawMessage(`{"word":"x"}`)}},
		Usage: &llmtest.Usage{InputTokens: 30, OutputTokens: 6}}
}

// TestFanOfAgentsNeverSeesA429: fifty agents of two turns on one model
// whose provider allows 60 requests a minute (the scripted server refuses
// the 61st within a minute with a 429). The llm plugin declares the
// model's requests_per_minute = 60 from its config (the real manifest,
// no catalog of the test's), the engine admits the turns against it, and
// so the provider refuses none, no turn is retried, the plugin's own
// limit refuses none (E_MODEL_RATE_LOCAL would be a retry), and the
// turns past the first minute's sixty waited in the queue (model_wait).
func TestFanOfAgentsNeverSeesA429(t *testing.T) {
	t.Parallel()
	const agents, rpm = 50, 60
	srv := llmtest.New()
	srv.Respond = twoTurns
	srv.RequestsPerMinute = rpm
	srv.StartT(t)
	eng := startEngineWith(t, "openai", srv, src, fmt.Sprintf(`"requests_per_minute":%d`, rpm), func(h *host.Host) engine.Tools { return h })
	ctx := context.Background()
	run := func(i int) string {
		res, err := eng.Submit(ctx, engine.StartRequest{Owner: "alice", Flow: "echoer", Input: json.RawMessage(fmt.Sprintf(`{"word":"w%d"}`, i))})
		if err != nil {
			t.Fatal(err)
		}
		return res.RunID
	}
	// One run first, so the plugin's launch delays no turn of the fan
	// past the others: the provider counts arrivals.
	ids := []string{run(0)}
	waitAll(t, eng, ids, time.Minute)
	for i := 1; i <= agents; i++ {
		ids = append(ids, run(i))
	}
	waitAll(t, eng, ids, 4*time.Minute)
	if n := srv.Refused(); n > 0 {
		t.Fatalf("the provider refused %d requests with a 429", n)
	}
	if n := len(srv.Requests()); n != 2*len(ids) {
		t.Fatalf("the provider saw %d requests for %d two-turn agents", n, len(ids))
	}
	waited := 0 // runs
	for _, id := range ids {
		evs, err := eng.Events(ctx, "alice", id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			switch e.Type {
			case "retry_scheduled":
				t.Fatalf("run %s retried a call: %v", id, e.Detail)
			}
		}
		for _, e := range evs {
			if e.Type == "model_wait" {
				waited++
				break
			}
		}
	}
	// The turns past the first minute's sixty waited in the queue: a run
	// whose first turn waited may take its second without, once the
	// window moved on, so at least half as many runs as those turns.
	if want := (2*len(ids) - rpm + 1) / 2; waited < want {
		t.Fatalf("%d runs waited for the model's limit; %d turns were past the first minute's %d, so at least %d runs must have", waited, 2*len(ids)-rpm, rpm, want)
	}
	if reqs := srv.Requests(); reqs[len(reqs)-1].At.Sub(reqs[0].At) < time.Minute {
		t.Fatalf("%d requests within a minute at requests_per_minute = %d", len(reqs), rpm)
	}
}

// waitAll waits until every run completed.
func waitAll(t *testing.T, eng *engine.Engine, ids []string, within time.Duration) {
	t.Helper()
	testutil.Eventually(t, within, func() error {
		for _, id := range ids {
			r, err := eng.Get(context.Background(), "alice", id)
			if err != nil {
				return err
			}
			if !r.Phase.Terminal() {
				return fmt.Errorf("run %s is %s", id, r.Phase)
			}
			if r.Phase != store.PhaseCompleted {
				t.Fatalf("run %s %s %+v", id, r.Phase, r.Error)
			}
		}
		return nil
	})
}
