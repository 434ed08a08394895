// Package examples holds weir's example flows; its test runs each of them
// to its end on the engine, against scripted in-process tools that answer
// as the real ones would, so an example that checks but fails at run time
// (reading a result in the wrong shape, say) fails here, not in a new
// user's hands.
package examples

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/memstore"
	"github.com/weirhq/weir/runtime/tool/tooltest"
	"github.com/weirhq/weir/sdk"
	"github.com/weirhq/weir/sdk/chat"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// scripted stands in for the first-party plugins and a model: each tool
// answers from its input alone, in the shape the real one does.
type scripted struct {
	mu    sync.Mutex
	mails []map[string]any
	notes map[string]string
}

func (s *scripted) tools() []sdk.Tool {
	return []sdk.Tool{
		{Name: "notes.plan", Idempotent: true, Cost: 1, Run: func(_ context.Context, c *sdk.Call) (any, error) {
			var in struct{ Topic string }
			if err := json.Unmarshal(c.Input, &in); err != nil {
				return nil, err
			}
			return map[string]any{"queries": []string{in.Topic + " history", in.Topic + " today"}}, nil
		}},
		{Name: "web.search", Idempotent: true, Cost: 2, Run: func(_ context.Context, c *sdk.Call) (any, error) {
			var in struct{ Q string }
			if err := json.Unmarshal(c.Input, &in); err != nil {
				return nil, err
			}
			return map[string]any{"q": in.Q, "url": "https://example.com/" + strings.ReplaceAll(in.Q, " ", "-")}, nil
		}},
		{Name: "notes.put", Idempotent: true, Run: func(_ context.Context, c *sdk.Call) (any, error) {
			var in struct{ Key, Text string }
			if err := json.Unmarshal(c.Input, &in); err != nil {
				return nil, err
			}
			s.mu.Lock()
			s.notes[in.Key] = in.Text
			s.mu.Unlock()
			return map[string]any{"key": in.Key}, nil
		}},
		{Name: "testkit.echo", Idempotent: true, Run: func(_ context.Context, c *sdk.Call) (any, error) { return c.Input, nil }},
		{Name: "mail.send", Cost: 1, Run: func(_ context.Context, c *sdk.Call) (any, error) {
			var m map[string]any
			if err := json.Unmarshal(c.Input, &m); err != nil {
				return nil, err
			}
			s.mu.Lock()
			s.mails = append(s.mails, m)
			n := len(s.mails)
			s.mu.Unlock()
			return map[string]any{"id": fmt.Sprint("mail-", n)}, nil
		}},
		// The MCP example's server, as the mcp plugin bridges it.
		{Name: "mcp.demo-lookup-item", Idempotent: true, Run: func(_ context.Context, c *sdk.Call) (any, error) {
			var in struct{ Key string }
			if err := json.Unmarshal(c.Input, &in); err != nil {
				return nil, err
			}
			return map[string]any{"key": in.Key, "title": "item " + in.Key}, nil
		}},
		{Name: "mcp.demo-append", Run: func(_ context.Context, c *sdk.Call) (any, error) {
			var in struct{ Line string }
			if err := json.Unmarshal(c.Input, &in); err != nil {
				return nil, err
			}
			s.mu.Lock()
			s.notes["journal"] += in.Line + "\n"
			s.mu.Unlock()
			return "appended " + in.Line, nil
		}},
		{Name: "mcp.demo-echo", Idempotent: true, Run: func(_ context.Context, c *sdk.Call) (any, error) {
			var in struct{ Text string }
			if err := json.Unmarshal(c.Input, &in); err != nil {
				return nil, err
			}
			return in.Text, nil
		}},
		{Name: "llm.chat", Idempotent: true, Contract: chat.Contract, Models: []sdk.Model{{Alias: "small", MaxTokens: 1024, InputCost: 1000, OutputCost: 1000}},
			Run: func(_ context.Context, c *sdk.Call) (any, error) {
				var req chat.Request
				if err := json.Unmarshal(c.Input, &req); err != nil {
					return nil, err
				}
				return model(req), nil
			}},
	}
}

// model answers the example flows' prompts: the planner's questions, a
// researcher's answer after noting it, the critic's mail, a summary.
func model(req chat.Request) chat.Response {
	first := req.Messages[0].Content
	last := req.Messages[len(req.Messages)-1]
	answer := func(text string) chat.Response {
		return chat.Response{Message: chat.Message{Role: chat.RoleAssistant, Content: text}, StopReason: chat.StopEndTurn,
			Usage: chat.Usage{InputTokens: 100, OutputTokens: 10}}
	}
	switch {
	case strings.HasPrefix(first, "Plan research on: "):
		return answer(`{"questions": ["what is a lease", "what is a wait"]}`)
	case strings.HasPrefix(first, "Question: ") && last.Role == chat.RoleUser:
		q := strings.TrimPrefix(first, "Question: ")
		args, _ := json.Marshal(map[string]string{"key": "research/" + q, "text": "notes on " + q})
		return chat.Response{Message: chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "c1", Name: "notes__put", Arguments: args}}},
			StopReason: chat.StopToolUse, Usage: chat.Usage{InputTokens: 100, OutputTokens: 10}}
	case strings.HasPrefix(first, "Question: "):
		return answer("An answer to " + strings.TrimPrefix(first, "Question: ") + ".")
	case strings.HasPrefix(first, "Review these answers"):
		return answer(fmt.Sprintf(`{"subject": "Four answers", "body": "%d"}`, strings.Count(first, "\n- ")))
	case strings.HasPrefix(first, "Morning digest for "):
		return answer("The digest of " + strings.TrimPrefix(first, "Morning digest for ") + ".")
	case strings.HasPrefix(first, "Summarize"):
		return answer("A summary of " + fmt.Sprint(strings.Count(first, "\n")) + " hits.")
	}
	return answer("I was not asked anything the examples ask.")
}

// exampleEngine registers files (paths under examples/) on an engine over
// the in-memory store and the scripted tools, and starts it.
func exampleEngine(t *testing.T, files ...string) (*engine.Engine, *scripted) {
	t.Helper()
	s := &scripted{notes: map[string]string{}}
	tools, err := tooltest.New(t.TempDir(), s.tools()...)
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New()
	eng, err := engine.Open(engine.Config{Store: st, Tools: tools, Tick: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var src []engine.SourceFile
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, engine.SourceFile{Path: filepath.ToSlash(f), Src: string(b)})
	}
	ctx := context.Background()
	// As the reader who runs them: a schedule belongs to an owner, and
	// the engine's own program (owner "") may not declare one.
	res, err := eng.RegisterAs(ctx, "reader", src)
	if err != nil {
		t.Fatalf("registering %v: %v", files, err)
	}
	if len(res.Diagnostics) > 0 {
		t.Fatalf("registering %v: %v", files, res.Diagnostics)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		eng.Stop(stop)
		st.Close()
	})
	return eng, s
}

// runToEnd starts flow with input, approves the wait at approve (if any)
// once the run parks there, and returns the run once it ended.
func runToEnd(t *testing.T, eng *engine.Engine, flow, input, approve string) *store.Run {
	t.Helper()
	ctx := context.Background()
	started, err := eng.Submit(ctx, engine.StartRequest{Owner: "reader", Flow: flow, Input: json.RawMessage(input)})
	if err != nil {
		t.Fatalf("starting %s: %v", flow, err)
	}
	var run *store.Run
	decided := approve == ""
	testutil.Eventually(t, time.Minute, func() error {
		if run, err = eng.Get(ctx, "reader", started.RunID); err != nil {
			return err
		}
		if run.Phase.Terminal() {
			return nil
		}
		if !decided {
			if err := eng.Decide(ctx, engine.DecideParams{Owner: "reader", RunID: run.ID, Node: approve, Approve: true}); err != nil {
				return fmt.Errorf("approving %s: %v", approve, err)
			}
			decided = true
		}
		return fmt.Errorf("run of %s is %s", flow, run.Phase)
	})
	if run.Phase != store.PhaseCompleted || !decided {
		t.Fatalf("run of %s ended %s (its wait %q decided: %v): %+v", flow, run.Phase, approve, decided, run.Error)
	}
	return run
}

func TestResearchRuns(t *testing.T) {
	t.Parallel()
	eng, s := exampleEngine(t, "research.star", "summarize.star")
	runToEnd(t, eng, "research", `{"topic": "rivers"}`, "approve")
	want := []map[string]any{{"body": "A summary of 2 hits."}}
	if !reflect.DeepEqual(s.mails, want) {
		t.Errorf("mails %v, want %v: the summary of both searches, published once", s.mails, want)
	}
}

// The Lua examples run to the same end, alone and mixed with Starlark:
// research in one language calls summarize in the other.
func TestResearchLuaRuns(t *testing.T) {
	t.Parallel()
	for _, files := range [][]string{
		{"research.lua", "summarize.lua"},
		{"research.star", "summarize.lua"},
		{"research.lua", "summarize.star"},
	} {
		t.Run(strings.Join(files, "+"), func(t *testing.T) {
			t.Parallel()
			eng, s := exampleEngine(t, files...)
			runToEnd(t, eng, "research", `{"topic": "rivers"}`, "approve")
			want := []map[string]any{{"body": "A summary of 2 hits."}}
			if !reflect.DeepEqual(s.mails, want) {
				t.Errorf("mails %v, want %v: the summary of both searches, published once", s.mails, want)
			}
		})
	}
}

func TestDigestRuns(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"run/digest.star", "run/digest.lua"} {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			eng, s := exampleEngine(t, file)
			runToEnd(t, eng, "digest", `{"topic":"durable agents","questions":["what is a lease","what is a cohort","what is a wait","what is a marker"],"to":"you@example.com"}`, "approve")
			if len(s.mails) != 1 || s.mails[0]["to"] != "you@example.com" || !strings.HasPrefix(s.mails[0]["body"].(string), "notes on what is a") {
				t.Errorf("mails %v, want one digest to you@example.com", s.mails)
			}
		})
	}
}

func TestAgentBriefRuns(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"agents/brief.star", "agents/brief.lua"} {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			eng, s := exampleEngine(t, file)
			run := runToEnd(t, eng, "brief", `{"topic":"durable agents","to":"you@example.com"}`, "approve")
			want := []map[string]any{{"to": "you@example.com", "subject": "Four answers", "body": "2"}}
			if !reflect.DeepEqual(s.mails, want) {
				t.Errorf("mails %v, want %v: the critic's mail over both answers, sent once", s.mails, want)
			}
			if len(s.notes) != 2 {
				t.Errorf("notes %v, want the two researchers' notes", s.notes)
			}
			if run.Spent <= 0 {
				t.Errorf("the brief spent %d: its model turns cost nothing", run.Spent)
			}
		})
	}
}

// TestMorningDigestFires: the scheduled agent example starts by itself:
// its schedule's first tick starts a run of morning, as the schedule and
// under the tick's request id, whose agent writes the tick's day's digest.
func TestMorningDigestFires(t *testing.T) {
	t.Parallel()
	eng, _ := exampleEngine(t, "agents/morning.star")
	ctx := context.Background()
	var run *store.Run
	testutil.Eventually(t, time.Minute, func() error {
		v, err := eng.Ops().Schedule(ctx, "reader", "morning_digest")
		if err != nil {
			return err
		}
		for _, f := range v.Firings {
			if f.RunID == "" {
				continue
			}
			if run, err = eng.Get(ctx, "reader", f.RunID); err != nil {
				return err
			}
			if run.Phase.Terminal() {
				return nil
			}
			return fmt.Errorf("the first firing's run is %s", run.Phase)
		}
		return fmt.Errorf("morning_digest has not fired yet: %+v", v.Firings)
	})
	if run.Phase != store.PhaseCompleted || run.StartedBy != "schedule:morning_digest" || !strings.HasPrefix(run.RequestID, "schedule:morning_digest:") {
		t.Fatalf("the scheduled run ended %s, started by %q, request id %q: %+v", run.Phase, run.StartedBy, run.RequestID, run.Error)
	}
	var out struct{ Day, Digest string }
	if err := json.Unmarshal(run.Output, &out); err != nil || len(out.Day) != len("2006-01-02") || out.Digest != "The digest of "+out.Day+"." {
		t.Fatalf("output %s (%v), want the digest of the tick's day", run.Output, err)
	}
}

// The MCP example runs over the bridged server's tools as the mcp plugin
// declares them: the lookup retried, the journal noted once.
func TestTicketRuns(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"mcp/ticket.star", "mcp/ticket.lua"} {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			eng, s := exampleEngine(t, file)
			run := runToEnd(t, eng, "ticket", `{"key":"T-1"}`, "")
			if got := string(run.Output); got != `"noted: appended T-1"` {
				t.Errorf("output %s, want the echo of the journal's answer", got)
			}
			if s.notes["journal"] != "T-1\n" {
				t.Errorf("journal %q, want the key noted once", s.notes["journal"])
			}
		})
	}
}

// The events example: an issue opened starts its run once (a
// redelivery and another action start nothing), and the release event
// with its number as key finishes it with one mail.
func TestIssueRunsOnEvents(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"events/issues.star", "events/issues.lua"} {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			eng, s := exampleEngine(t, file)
			ctx := context.Background()
			send := func(id, name, key, payload string) *engine.EventSendResult {
				t.Helper()
				res, err := eng.Ops().EventSend(ctx, engine.EventSendParams{Owner: "reader", ID: id, Name: name, Key: key, Payload: json.RawMessage(payload)})
				if err != nil {
					t.Fatalf("sending %s %s: %v", name, id, err)
				}
				return res
			}
			opened := `{"action":"opened","issue":{"number":42,"title":"Leases expire early","user":{"login":"ada"}}}`
			first := send("d-1", "github.issues", "42", opened)
			if len(first.Event.Started) != 1 || first.Event.Started[0].RunID == "" {
				t.Fatalf("the opened issue started %+v, want one run", first.Event.Started)
			}
			runID := first.Event.Started[0].RunID
			if again := send("d-1", "github.issues", "42", opened); !again.Duplicate {
				t.Fatalf("the redelivery is not a duplicate: %+v", again)
			}
			labeled := send("d-2", "github.issues", "42", `{"action":"labeled","issue":{"number":42,"title":"Leases expire early","user":{"login":"ada"}}}`)
			if len(labeled.Event.Started) != 1 || labeled.Event.Started[0].Skipped != "filtered out" {
				t.Fatalf("another action started %+v, want it filtered out", labeled.Event.Started)
			}
			testutil.Eventually(t, time.Minute, func() error {
				run, err := eng.Get(ctx, "reader", runID)
				if err != nil {
					return err
				}
				if run.Phase != store.PhaseWaiting {
					return fmt.Errorf("the issue's run is %s, want it waiting for the release", run.Phase)
				}
				return nil
			})
			send("r-1", "release.shipped", "42", `{"version":"v1.4.0"}`)
			var run *store.Run
			testutil.Eventually(t, time.Minute, func() error {
				var err error
				if run, err = eng.Get(ctx, "reader", runID); err != nil {
					return err
				}
				if !run.Phase.Terminal() {
					return fmt.Errorf("the issue's run is %s", run.Phase)
				}
				return nil
			})
			if run.Phase != store.PhaseCompleted || run.StartedBy != "trigger:issue_opened" {
				t.Fatalf("the issue's run ended %s, started by %q: %+v", run.Phase, run.StartedBy, run.Error)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if len(s.mails) != 1 || s.mails[0]["to"] != "ada@example.com" || s.mails[0]["body"] != "The fix of #42 shipped in v1.4.0." {
				t.Fatalf("mails %v, want one to the reporter naming the release", s.mails)
			}
			if s.notes["issue/42"] != "Leases expire early" {
				t.Fatalf("notes %v, want the issue noted", s.notes)
			}
		})
	}
}
