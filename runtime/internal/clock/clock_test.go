package clock

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestFakeNowMovesOnlyOnAdvance(t *testing.T) {
	t.Parallel()
	f := NewFake(t0)
	if got := f.Now(); !got.Equal(t0) {
		t.Fatalf("Now = %v, want %v", got, t0)
	}
	f.Advance(90 * time.Second)
	if got, want := f.Now(), t0.Add(90*time.Second); !got.Equal(want) {
		t.Fatalf("Now = %v, want %v", got, want)
	}
}

func TestFakeTickerFiresPerPeriodAndDropsUnread(t *testing.T) {
	t.Parallel()
	f := NewFake(t0)
	tk := f.NewTicker(10 * time.Second)
	if f.Tickers() != 1 {
		t.Fatalf("Tickers = %d, want 1", f.Tickers())
	}
	f.Advance(9 * time.Second)
	select {
	case <-tk.C():
		t.Fatal("ticked before its period")
	default:
	}
	f.Advance(time.Second)
	select {
	case at := <-tk.C():
		if !at.Equal(t0.Add(10 * time.Second)) {
			t.Fatalf("tick at %v", at)
		}
	default:
		t.Fatal("no tick after a full period")
	}
	// Three periods pass unread: one tick waits, the rest are dropped.
	f.Advance(30 * time.Second)
	f.Advance(0)
	<-tk.C()
	select {
	case <-tk.C():
		t.Fatal("an unread tick was kept")
	default:
	}
	tk.Stop()
	if f.Tickers() != 0 {
		t.Fatalf("Tickers = %d after Stop, want 0", f.Tickers())
	}
	f.Advance(time.Hour)
	select {
	case <-tk.C():
		t.Fatal("ticked after Stop")
	default:
	}
}

func TestRealClockTicks(t *testing.T) {
	t.Parallel()
	c := Real()
	before := time.Now()
	if c.Now().Before(before) {
		t.Fatal("real Now before time.Now")
	}
	tk := c.NewTicker(time.Millisecond)
	defer tk.Stop()
	select {
	case <-tk.C():
	case <-time.After(time.Minute):
		t.Fatal("real ticker never fired")
	}
}
