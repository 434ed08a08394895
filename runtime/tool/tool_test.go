package tool

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestErrorClassification(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err        error
		kind       Kind
		retryable  bool
		retryAfter time.Duration
		text       string
	}{
		{&Error{Kind: KindRetryable, Tool: "p.t", Message: "busy", RetryAfter: time.Second}, KindRetryable, true, time.Second, "p.t: retryable: busy (retry after 1s)"},
		{&Error{Kind: KindCrashed, Message: "gone"}, KindCrashed, true, 0, "crashed: gone"},
		{&Error{Kind: KindPermanent, Tool: "p.t", Message: "no", Code: "E_NOT_FOUND"}, KindPermanent, false, 0, "p.t: permanent: E_NOT_FOUND: no"},
		{fmt.Errorf("wrapped: %w", &Error{Kind: KindDeadline, Tool: "p.t", Message: "late"}), KindDeadline, false, 0, "wrapped: p.t: deadline: late"},
		{errors.New("plain"), "", false, 0, "plain"},
	}
	for _, tt := range tests {
		if got := KindOf(tt.err); got != tt.kind {
			t.Errorf("KindOf(%v) = %q, want %q", tt.err, got, tt.kind)
		}
		if got := IsRetryable(tt.err); got != tt.retryable {
			t.Errorf("IsRetryable(%v) = %v, want %v", tt.err, got, tt.retryable)
		}
		if got := RetryAfterOf(tt.err); got != tt.retryAfter {
			t.Errorf("RetryAfterOf(%v) = %v, want %v", tt.err, got, tt.retryAfter)
		}
		if got := tt.err.Error(); got != tt.text {
			t.Errorf("Error() = %q, want %q", got, tt.text)
		}
	}
}
