package agente2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/llmtest"
	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/host"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/badgerstore"
)

func TestMain(m *testing.M) { testutil.Main(m, testutil.Plugins("llm", "testkit")) }

// small is the model alias the llm plugin is configured with, and what its
// manifest will say of it. Manifests do not carry a chat tool's models
// yet, so catalog adds it; the calls all go through the real host.
var small = flows.ModelInfo{Alias: "small", MaxTokens: 256, InputCost: 100_000, OutputCost: 400_000}

type catalog struct{ *host.Host }

func (c catalog) LookupTool(name string) (flows.ToolInfo, bool) {
	info, ok := c.Host.LookupTool(name)
	if ok && name == "llm.chat" {
		info.Models = []flows.ModelInfo{small}
	}
	return info, ok
}

const src = `
flow(name = "echoer", nodes = [
    agent("a", model = "small", system = "Use the echo tool.",
          prompt = lambda ctx: "Echo " + ctx.input["word"], tools = ["testkit.echo"], max_turns = 3),
])
`

// TestAgentWithTheLLMPlugin: an agent runs a tool-use turn and a final
// answer through the real llm plugin against the scripted server in both
// providers' formats. The tool's result reaches the model, and the tokens
// the server billed are exactly the tokens journaled and charged.
func TestAgentWithTheLLMPlugin(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"openai", "anthropic"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			srv := llmtest.New(
				llmtest.Step{ToolCalls: []llmtest.ToolCall{{Name: "testkit__echo", Arguments: json.RawMessage(`{"word":"heron"}`)}},
					Usage: &llmtest.Usage{InputTokens: 120, OutputTokens: 12}},
				llmtest.Step{Text: "The echo said heron.", Usage: &llmtest.Usage{InputTokens: 160, OutputTokens: 8}},
			)
			srv.StartT(t)
			eng := startEngine(t, kind, srv, src)
			ctx := context.Background()
			started, err := eng.Submit(ctx, engine.StartRequest{Owner: "alice", Flow: "echoer", Input: json.RawMessage(`{"word":"heron"}`)})
			if err != nil {
				t.Fatal(err)
			}
			var run *store.Run
			testutil.Eventually(t, 60*time.Second, func() error {
				if run, err = eng.Get(ctx, "alice", started.RunID); err != nil {
					return err
				}
				if !run.Phase.Terminal() {
					return fmt.Errorf("run is %s", run.Phase)
				}
				return nil
			})
			if run.Phase != store.PhaseCompleted {
				t.Fatalf("run %s %+v", run.Phase, run.Error)
			}
			var out struct {
				Answer string `json:"answer"`
				Turns  int    `json:"turns"`
				Usage  struct {
					InputTokens  int64 `json:"input_tokens"`
					OutputTokens int64 `json:"output_tokens"`
				} `json:"usage"`
				Cost int64 `json:"cost"`
			}
			if err := json.Unmarshal(run.Output, &out); err != nil {
				t.Fatal(err)
			}
			billed := srv.Billed()
			// Each turn is charged its usage at the model's prices, rounded
			// up: ceil((120*0.1 + 12*0.4)) = 17 and ceil(16 + 3.2) = 20.
			if out.Answer != "The echo said heron." || out.Turns != 2 || out.Usage.InputTokens != billed.InputTokens ||
				out.Usage.OutputTokens != billed.OutputTokens || out.Cost != 37 || run.Spent != 37 {
				t.Errorf("result %+v spent %d; server billed %+v: want the answer, 2 turns, the billed tokens and cost 37", out, run.Spent, billed)
			}
			if billed.InputTokens != 280 || billed.OutputTokens != 20 || srv.Turns() != 2 {
				t.Errorf("server billed %+v over %d turns, want 280/20 over 2", billed, srv.Turns())
			}
			// The tool's result goes back in the provider's own form of a
			// tool message.
			result := map[string]string{"openai": `"role":"tool"`, "anthropic": `"tool_result"`}[kind]
			reqs := srv.Requests()
			if len(reqs) != 2 || !strings.Contains(string(reqs[0].Body), "testkit__echo") ||
				strings.Contains(string(reqs[0].Body), result) || !strings.Contains(string(reqs[1].Body), result) {
				t.Errorf("requests to the provider: %d; the tool is offered under its provider name and its result reaches the second turn only", len(reqs))
				for _, r := range reqs {
					t.Logf("%s", r.Body)
				}
			}
		})
	}
}

// startEngine starts an engine over a Badger store with the real llm
// plugin, configured with one provider of kind on srv and the alias
// small, and testkit, with the flows of src registered.
func startEngine(t *testing.T, kind string, srv *llmtest.Server, src string) *engine.Engine {
	t.Helper()
	return startEngineWith(t, kind, srv, src, "", func(h *host.Host) engine.Tools { return catalog{h} })
}

// startEngineWith is startEngine with more keys for model "small"'s
// block of the llm plugin's config (limits: `"requests_per_minute":60`)
// and the engine's tools made from the host.
func startEngineWith(t *testing.T, kind string, srv *llmtest.Server, src, modelKeys string, tools func(*host.Host) engine.Tools) *engine.Engine {
	t.Helper()
	base := srv.OpenAIBaseURL()
	if kind == "anthropic" {
		base = srv.URL()
	}
	if modelKeys != "" {
		modelKeys = "," + modelKeys
	}
	cfg := fmt.Sprintf(`{"providers":{"local":{"kind":%q,"base_url":%q}},"models":{"small":{"provider":"local","model":"m-1","input_cost":%d,"output_cost":%d,"max_tokens":%d%s}}}`,
		kind, base, small.InputCost, small.OutputCost, small.MaxTokens, modelKeys)

	dir := t.TempDir()
	plugins := filepath.Join(dir, "plugins")
	for _, name := range []string{"llm", "testkit"} {
		if _, err := host.Install(plugins, testutil.Plugin(t, name), nil); err != nil {
			t.Fatal(err)
		}
	}
	h, err := host.New(host.Config{PluginsDir: plugins, DataDir: dir, PluginConfig: map[string]json.RawMessage{"llm": json.RawMessage(cfg)}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := badgerstore.Open(filepath.Join(dir, "store"), badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(engine.Config{Store: st, Tools: tools(h), Tick: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if res, err := eng.Register(ctx, []engine.SourceFile{{Path: "agent.star", Src: src}}); err != nil || len(res.Diagnostics) > 0 {
		t.Fatalf("register: %v %v", err, res)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		eng.Stop(stop)
		h.Close()
		st.Close()
	})
	return eng
}

// waitRun waits for run id to end and returns it.
func waitRun(t *testing.T, eng *engine.Engine, id string) *store.Run {
	t.Helper()
	var run *store.Run
	testutil.Eventually(t, 60*time.Second, func() error {
		var err error
		if run, err = eng.Get(context.Background(), "alice", id); err != nil {
			return err
		}
		if !run.Phase.Terminal() {
			return fmt.Errorf("run is %s", run.Phase)
		}
		return nil
	})
	return run
}

const wrappedSrc = `
flow(name = "summer", doc = "Sums numbers.", input = {"type": "array", "items": {"type": "integer"}}, nodes = [
    task("t", tool = "testkit.echo", args = lambda ctx: {"got": ctx.input}),
])

flow(name = "shout", input = {"type": "string", "minLength": 1}, nodes = [
    task("t", tool = "testkit.echo", args = lambda ctx: {"got": ctx.input}),
])

flow(name = "delegator", nodes = [
    agent("a", model = "small", prompt = "Go", flows = ["summer", "shout"], max_turns = 3),
])
`

// TestAgentOffersNonObjectFlowInputWrapped: a flow whose input is an
// array or a string is offered to the model as an object with that input
// under "input" (both providers take object schemas only), and the
// model's call is unwrapped before it reaches the flow: the child runs
// get the array and the string themselves. A call that leaves the
// wrapper out is refused as the call's result, told to the model.
func TestAgentOffersNonObjectFlowInputWrapped(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"openai", "openai-responses", "anthropic"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			srv := llmtest.New(
				llmtest.Step{ToolCalls: []llmtest.ToolCall{
					{ID: "c1", Name: "summer", Arguments: json.RawMessage(`{"input":[1,2,3]}`)},
					{ID: "c2", Name: "shout", Arguments: json.RawMessage(`{"input":"hey"}`)},
					{ID: "c3", Name: "summer", Arguments: json.RawMessage(`{"numbers":[4]}`)},
				}},
				llmtest.Step{Text: "done"},
			)
			srv.StartT(t)
			eng := startEngine(t, kind, srv, wrappedSrc)
			ctx := context.Background()
			started, err := eng.Submit(ctx, engine.StartRequest{Owner: "alice", Flow: "delegator", Input: json.RawMessage(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			run := waitRun(t, eng, started.RunID)
			if run.Phase != store.PhaseCompleted {
				t.Fatalf("run %s %+v", run.Phase, run.Error)
			}
			kids, err := eng.List(ctx, "alice", store.RunListParams{ParentRunID: run.ID})
			if err != nil {
				t.Fatal(err)
			}
			inputs := map[string]string{}
			for _, k := range kids {
				inputs[k.Flow] = string(k.Input)
			}
			if len(kids) != 2 || inputs["summer"] != `[1,2,3]` || inputs["shout"] != `"hey"` {
				t.Fatalf("children %v: want summer with [1,2,3] and shout with \"hey\"", inputs)
			}
			reqs := srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests", len(reqs))
			}
			var first struct {
				Tools []struct {
					Name        string          `json:"name"`
					InputSchema json.RawMessage `json:"input_schema"`
					Parameters  json.RawMessage `json:"parameters"`
					Function    struct {
						Name       string          `json:"name"`
						Parameters json.RawMessage `json:"parameters"`
					} `json:"function"`
				} `json:"tools"`
			}
			if err := json.Unmarshal(reqs[0].Body, &first); err != nil {
				t.Fatal(err)
			}
			offered := map[string]string{}
			for _, tool := range first.Tools {
				switch kind {
				case "openai":
					offered[tool.Function.Name] = string(tool.Function.Parameters)
				case "openai-responses":
					offered[tool.Name] = string(tool.Parameters)
				default:
					offered[tool.Name] = string(tool.InputSchema)
				}
			}
			for name, inner := range map[string]string{"summer": `{"items":{"type":"integer"},"type":"array"}`, "shout": `{"minLength":1,"type":"string"}`} {
				var got map[string]any
				if err := json.Unmarshal([]byte(offered[name]), &got); err != nil || got["type"] != "object" {
					t.Fatalf("%s offered as %s, want an object schema", name, offered[name])
				}
				props, _ := json.Marshal(got["properties"].(map[string]any)["input"])
				req, _ := json.Marshal(got["required"])
				if string(props) != inner || string(req) != `["input"]` {
					t.Errorf("%s offered as %s, want %s wrapped under input", name, offered[name], inner)
				}
			}
			// The call without the wrapper was answered with an error the
			// model reads in the second turn.
			second := string(reqs[1].Body)
			if !strings.Contains(second, "E_BAD_INPUT") || !strings.Contains(second, `exactly that one property`) {
				t.Errorf("the second turn does not tell the model its unwrapped call was refused:\n%s", second)
			}
		})
	}
}
