package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

const echoFlow = `flow(name = "echo", nodes = [task("t", tool = "kit.echo", args = lambda ctx: {"x": 1})])`

// Below the disk watermark new runs and registrations are refused with
// E_DISK_FULL (class storage, the free space in the message), health says
// so, a write the store refuses for a full disk does not close admission,
// and admission reopens by itself when space returns.
func TestDiskWatermark(t *testing.T) {
	t.Parallel()
	var free atomic.Int64
	free.Store(1 << 30)
	b := setupUnit(t, Config{MinFreeBytes: 100 << 20, DiskFree: func() (int64, error) { return free.Load(), nil }}, echoFlow)
	ctx := context.Background()
	b.start(t, "echo", `{}`, "")

	free.Store(10 << 20)
	_, err := b.eng.Submit(ctx, StartRequest{Owner: "alice", Flow: "echo"})
	var ee *Error
	if !errors.As(err, &ee) || ee.Code != CodeDiskFull || ee.Class != ClassStorage || !strings.Contains(ee.Message, "10.0 MiB free, below the 100.0 MiB watermark") {
		t.Fatalf("submit below the watermark: %v", err)
	}
	if _, err := b.eng.Register(ctx, []SourceFile{{Path: "x.star", Src: echoFlow}}); ErrorCode(err) != CodeDiskFull {
		t.Fatalf("register below the watermark: %v", err)
	}
	if h := b.eng.Health(ctx); h.Admission != CodeDiskFull || !strings.Contains(h.Reason, "10.0 MiB free") {
		t.Fatalf("health below the watermark: %+v", h)
	}
	// The store's own refusal is not a storage fault.
	if se := b.eng.admission.storageFailed(fmt.Errorf("commit: %w", store.ErrDiskFull)); se.Code != CodeDiskFull {
		t.Fatalf("a disk-full write: %+v", se)
	}

	free.Store(1 << 30)
	if h := b.eng.Health(ctx); h.Admission != "open" {
		t.Fatalf("health once space returned: %+v", h)
	}
	b.start(t, "echo", `{}`, "")
}

// The audit stream is bounded: ids are cut, each caller records a burst
// and then one event per AuditInterval (the rest counted on its next
// event), and old events are pruned.
func TestAuditStreamBounds(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, echoFlow)
	ctx := context.Background()
	long := strings.Repeat("r", MaxIDBytes)
	for range AuditBurst + 30 {
		if _, err := b.eng.Cancel(ctx, "mallory", "run_"+long); ErrorCode(err) != CodeNotFound {
			t.Fatalf("a cancel of someone else's run: %v", err)
		}
	}
	b.eng.Cancel(ctx, "bob", "run_x") // another caller has its own allowance
	evs := b.audit(t)
	if len(evs) != AuditBurst+1 {
		t.Fatalf("%d audit events, want the burst of %d and bob's", len(evs), AuditBurst)
	}
	if run := evs[0].Detail["run"].(string); len(run) > MaxAuditFieldBytes+32 || !strings.Contains(run, fmt.Sprintf("(%d bytes)", len(long)+4)) {
		t.Fatalf("an audited id of %d bytes is kept as %q", len(long)+4, run)
	}
	b.clock.Advance(AuditInterval)
	b.eng.Cancel(ctx, "mallory", "run_y")
	evs = b.audit(t)
	if last := evs[len(evs)-1]; last.Detail["caller"] != "mallory" || fmt.Sprint(last.Detail["suppressed"]) != "30" {
		t.Fatalf("the next event of the caller after the burst: %+v", last.Detail)
	}
	b.clock.Advance(time.Hour)
	if n, err := b.eng.PruneAudit(ctx, b.clock.Now().Add(-time.Minute)); err != nil || n != len(evs) {
		t.Fatalf("PruneAudit = %d, %v; want %d", n, err, len(evs))
	}
	if left := b.audit(t); len(left) != 0 {
		t.Fatalf("%d audit events left after pruning", len(left))
	}
}

// Once a caller's audit burst is spent on made-up ids, its foreign reads
// and cancels of runs that exist are still recorded, within each run's
// own allowance (AuditRunBurst, then one per AuditRunInterval, the rest
// counted); made-up ids stay unrecorded, and what a run's allowance
// recorded is not counted again as suppressed on the caller's next event.
func TestAuditForeignAccessToExistingRunsAfterBurst(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, echoFlow)
	ctx := context.Background()
	real1, real2 := b.start(t, "echo", `{}`, "r1"), b.start(t, "echo", `{}`, "r2")
	flood := func(n int) {
		t.Helper()
		for i := range n {
			if _, err := b.eng.Cancel(ctx, "mallory", fmt.Sprintf("run_madeup%d", i)); ErrorCode(err) != CodeNotFound {
				t.Fatalf("a made-up id: %v", err)
			}
		}
	}
	flood(AuditBurst + 10)
	if n := len(b.audit(t)); n != AuditBurst {
		t.Fatalf("%d events after the flood of made-up ids, want the burst of %d", n, AuditBurst)
	}
	for i := range AuditRunBurst + 3 {
		if _, err := b.eng.Get(ctx, "mallory", real1); ErrorCode(err) != CodeNotFound {
			t.Fatalf("a foreign get %d: %v", i, err)
		}
	}
	if _, err := b.eng.Cancel(ctx, "mallory", real2); ErrorCode(err) != CodeNotFound {
		t.Fatalf("a foreign cancel: %v", err)
	}
	flood(1)
	evs := b.audit(t)[AuditBurst:]
	if len(evs) != AuditRunBurst+1 { // run 1's burst and run 2's first
		t.Fatalf("%d events for the foreign accesses to real runs, want %d of run 1 and one of run 2", len(evs), AuditRunBurst)
	}
	for i, ev := range evs {
		want, action := real1, "get"
		if i == AuditRunBurst {
			want, action = real2, "cancel"
		}
		if ev.Detail["run"] != want || ev.Detail["action"] != action || ev.Detail["caller"] != "mallory" || ev.Detail["over_caller_limit"] != true {
			t.Fatalf("event %d: %+v", i, ev.Detail)
		}
	}
	// A minute on, the caller has a new burst: its first event counts the
	// 11 made-up ids and the 3 gets of run 1 that nothing recorded, not the
	// ones run 1's allowance recorded.
	b.clock.Advance(AuditRunInterval)
	flood(AuditBurst)
	evs = b.audit(t)
	if first := evs[len(evs)-AuditBurst]; fmt.Sprint(first.Detail["suppressed"]) != "14" {
		t.Fatalf("the caller's next event: %+v", first.Detail)
	}
	// Its burst spent again, run 1 has a new allowance of its own, and
	// its next record counts the 3 gets it did not record.
	b.eng.Get(ctx, "mallory", real1)
	evs = b.audit(t)
	if last := evs[len(evs)-1]; last.Detail["run"] != real1 || last.Detail["over_caller_limit"] != true || fmt.Sprint(last.Detail["suppressed_on_run"]) != "3" {
		t.Fatalf("run 1's next event: %+v", last.Detail)
	}
	flood(1)
	if n := len(b.audit(t)); n != len(evs) {
		t.Fatalf("a made-up id past the burst was recorded (%d events, want %d)", n, len(evs))
	}
}

// A flow name belongs to its first registrant: another owner's
// registration of a file that declares it is refused whole (the file's
// new names are not stored either) and audited; the owner registers new
// versions; a name from before owners is taken by its next registrant.
func TestFlowNameOwners(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, "")
	ctx := context.Background()
	reg := func(owner, src string) error {
		_, err := b.eng.RegisterAs(ctx, owner, []SourceFile{{Path: "f.star", Src: src}})
		return err
	}
	flow := func(name, x string) string {
		return fmt.Sprintf(`flow(name = %q, nodes = [task("t", tool = "kit.echo", args = {"x": %q})])`+"\n", name, x)
	}
	if err := reg("alice", flow("payroll", "1")); err != nil {
		t.Fatal(err)
	}
	err := reg("mallory", flow("fresh", "1")+flow("payroll", "evil"))
	if ErrorCode(err) != CodeForbidden || !strings.Contains(err.Error(), `"payroll"`) {
		t.Fatalf("another owner's registration: %v", err)
	}
	fl, err := b.eng.Flows(ctx, FlowListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(fl) != 1 || fl[0].Name != "payroll" || fl[0].Owner != "alice" {
		t.Fatalf("flows after the refusal: %+v", fl)
	}
	if err := reg("alice", flow("payroll", "2")); err != nil {
		t.Fatalf("the owner's new version: %v", err)
	}
	var refusals int
	_ = b.st.View(ctx, func(tx store.Tx) error {
		evs, err := tx.EventList(store.EventListParams{RunID: AuditStream})
		for _, e := range evs {
			if e.Detail["flow"] == "payroll" && e.Detail["caller"] == "mallory" && e.Detail["action"] == "register" {
				refusals++
			}
		}
		return err
	})
	if refusals != 1 {
		t.Fatalf("%d audit events of the refusal, want 1", refusals)
	}
	// A version stored before flows had owners: the next registrant
	// takes the name.
	if _, err := b.eng.Register(ctx, []SourceFile{{Path: "old.star", Src: flow("legacy", "1")}}); err != nil {
		t.Fatal(err)
	}
	if err := reg("bob", flow("legacy", "2")); err != nil {
		t.Fatalf("taking an unowned name: %v", err)
	}
	if err := reg("carol", flow("legacy", "3")); ErrorCode(err) != CodeForbidden {
		t.Fatalf("after bob took it: %v", err)
	}
}

// audit is the audit stream's events, oldest first.
func (b *bundle) audit(t testing.TB) []*store.Event {
	t.Helper()
	var evs []*store.Event
	if err := b.st.View(context.Background(), func(tx store.Tx) error {
		var err error
		evs, err = tx.EventList(store.EventListParams{RunID: AuditStream})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return evs
}
