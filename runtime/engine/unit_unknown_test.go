package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

const unknownSrc = `
flow(name = "once", nodes = [task("call", tool = "kit.lose", args = lambda ctx: ctx.input, at_most_once = True)])

flow(name = "idem", nodes = [task("call", tool = "kit.lose_idem", args = lambda ctx: ctx.input, retries = 2)])

flow(name = "big", nodes = [task("send", tool = "kit.send", args = lambda ctx: {"to": "a@b.c", "pad": ctx.input["pad"]}, at_most_once = True)])
`

// A tool's unknown and not_sent (protocol revision 2, docs/design.md §3):
// unknown ends an at-most-once call as E_OUTCOME_UNKNOWN without a second
// call, and is retried with the same key for an idempotent tool; not_sent
// is retried for an idempotent tool and, on an at-most-once node (which
// declares no retries), fails with the tool's own error: never unknown,
// since nothing happened.
func TestUnitUnknownAndNotSent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, flow, input string
		phase             store.Phase
		code              string // the run's error code, "" for none
		calls             int    // calls that reached the tool
		idem              store.IdemState
	}{
		{"unknown at most once", "once", `{"times": 1, "kind": "unknown"}`, store.PhaseFailed, CodeOutcomeUnknown, 1, store.IdemDone},
		{"unknown idempotent", "idem", `{"times": 2, "kind": "unknown"}`, store.PhaseCompleted, "", 3, ""},
		{"not sent at most once", "once", `{"times": 1, "kind": "not_sent"}`, store.PhaseFailed, "E_KIT_LOST", 1, store.IdemDone},
		{"not sent idempotent", "idem", `{"times": 2, "kind": "not_sent"}`, store.PhaseCompleted, "", 3, ""},
		{"not sent idempotent, retries spent", "idem", `{"times": 5, "kind": "not_sent"}`, store.PhaseFailed, CodeRetriesExhausted, 3, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupUnit(t, Config{RetryBase: time.Second, RetryMax: 2 * time.Second}, unknownSrc)
			id := b.start(t, tt.flow, tt.input, "")
			run := b.advanceUntil(t, id, 2*time.Second, "terminal", func(r *store.Run) bool { return r.Phase.Terminal() })
			code := ""
			if run.Error != nil {
				code = run.Error.Code
			}
			if run.Phase != tt.phase || code != tt.code {
				t.Fatalf("%s %+v, want %s with %q", run.Phase, run.Error, tt.phase, tt.code)
			}
			tool := "kit.lose"
			if tt.flow == "idem" {
				tool = "kit.lose_idem"
			}
			if n := b.tools.Calls(tool); n != tt.calls {
				t.Errorf("%d calls, want %d", n, tt.calls)
			}
			if tt.code == CodeOutcomeUnknown && !strings.Contains(run.Error.Message, "planned losses") {
				t.Errorf("message %q does not say what the tool said", run.Error.Message)
			}
			var keys int
			b.kit.read(func() { keys = len(b.kit.fails) })
			if keys != 1 {
				t.Errorf("tries under %d idempotency keys, want one key for every try", keys)
			}
			err := b.mem.View(context.Background(), func(tx store.Tx) error {
				rec, err := tx.IdemGet(id + "/call/1")
				if tt.idem == "" {
					return nil
				}
				if err != nil {
					return err
				}
				if rec.State != tt.idem {
					t.Errorf("record %+v: want state %s", rec, tt.idem)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// An at-most-once call that answered a result over MaxResultBytes did
// happen: the node fails with E_RESULT_TOO_LARGE and the call is recorded
// done with it, never E_OUTCOME_UNKNOWN at the run's end.
func TestUnitTooLargeAtMostOnceIsNotUnknown(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unknownSrc)
	id := b.start(t, "big", fmt.Sprintf(`{"pad": %d}`, MaxResultBytes+1), "")
	run := b.waitTerminal(t, id)
	wantFailed(t, run, CodeResultTooLarge)
	if n := b.sends(); n != 1 {
		t.Errorf("%d sends, want 1", n)
	}
	err := b.mem.View(context.Background(), func(tx store.Tx) error {
		rec, err := tx.IdemGet(id + "/send/1")
		if err != nil {
			return err
		}
		if rec.State != store.IdemDone || rec.Error == nil || rec.Error.Code != CodeResultTooLarge {
			t.Errorf("record %+v: want done with %s", rec, CodeResultTooLarge)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
