package sdk

import (
	"context"
	"testing"
)

func TestCancelThatOvertakesItsCall(t *testing.T) {
	t.Parallel()
	var ct callTable
	if ct.cancel(7) {
		t.Fatal("cancel of a call not started reported it running")
	}
	ctx, cancel := context.WithCancel(context.Background())
	ct.start(7, cancel)
	if ctx.Err() == nil {
		t.Fatal("a call whose cancel arrived first started uncancelled")
	}
	ct.end(7)

	ctx, cancel = context.WithCancel(context.Background())
	ct.start(8, cancel)
	if ctx.Err() != nil {
		t.Fatal("an early cancel leaked to another call")
	}
	if !ct.cancel(8) || ctx.Err() == nil {
		t.Fatal("cancel of a running call did not cancel it")
	}
	ct.end(8)
	if len(ct.running) != 0 || len(ct.early) != 0 {
		t.Fatalf("table not empty: %v %v", ct.running, ct.early)
	}
}
