package engine

import (
	"testing"

	"github.com/weirhq/weir/flows/render"
	"github.com/weirhq/weir/runtime/store"
)

// A node whose error wire a cancel took (its child run was cancelled) is
// drawn cancelled; every other error draws it failed.
func TestErrorMark(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  *store.RunError
		want render.Mark
	}{
		{&store.RunError{Code: CodeCancelled, Message: "the run was cancelled"}, render.MarkCancelled},
		{&store.RunError{Code: "E_UPSTREAM", Message: "down"}, render.MarkFailed},
		{&store.RunError{Code: "E_CANCELLED_BY_TOOL"}, render.MarkFailed},
		{nil, render.MarkFailed},
	} {
		if got := errorMark(tt.err); got != tt.want {
			t.Errorf("errorMark(%+v) = %s, want %s", tt.err, got, tt.want)
		}
	}
}
