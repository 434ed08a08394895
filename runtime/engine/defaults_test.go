package engine

import "testing"

// DefaultConfig is what a zero Config runs with: a daemon that shows
// DefaultConfig's values shows the limits in force.
func TestDefaultConfigIsWhatZeroTakes(t *testing.T) {
	t.Parallel()
	got, want := Config{}.withDefaults(), DefaultConfig()
	if got.Workers != want.Workers || got.MaxQueued != want.MaxQueued || got.QueueTimeout != want.QueueTimeout ||
		got.LeaseTimeout != want.LeaseTimeout || got.MaxAttempts != want.MaxAttempts || got.RetryBase != want.RetryBase ||
		got.RetryMax != want.RetryMax || got.Tick != want.Tick || got.FlowCacheBytes != want.FlowCacheBytes {
		t.Errorf("Config{}.withDefaults() = %+v, DefaultConfig() = %+v", got, want)
	}
	if want.Workers <= 0 || want.MaxQueued <= 0 || want.QueueTimeout <= 0 || want.LeaseTimeout <= 0 || want.MaxAttempts <= 0 ||
		want.RetryBase <= 0 || want.RetryBase > want.RetryMax || want.Tick <= 0 || want.FlowCacheBytes <= 0 {
		t.Errorf("DefaultConfig() has a limit that is off or out of order: %+v", want)
	}
}
