package ticks

import (
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	name, tick, ok := Parse("schedule:digest:2026-12-02T09:00:00+01:00")
	if !ok || name != "digest" || !tick.Equal(time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)) {
		t.Fatalf("Parse = %q, %v, %v", name, tick, ok)
	}
	for _, id := range []string{"", "order-1", "schedule:", "schedule::2026-12-02T09:00:00Z", "schedule:digest",
		"schedule:digest:tomorrow", "schedule:sha256:0123abcd", "event:digest:2026-12-02T09:00:00Z"} {
		if name, _, ok := Parse(id); ok {
			t.Errorf("Parse(%q) = %q, ok; want not a firing", id, name)
		}
	}
}

func TestEvery(t *testing.T) {
	got := Every("s", "tick", "1h", 3, 2)
	want := "schedule(\"s3\", flow = \"tick\", every = \"1h\")\nschedule(\"s4\", flow = \"tick\", every = \"1h\")\n"
	if got != want {
		t.Fatalf("Every = %q, want %q", got, want)
	}
	if n := strings.Count(Every("s", "tick", "1s", 0, 100), "\n"); n != 100 {
		t.Fatalf("Every declared %d schedules, want 100", n)
	}
}
