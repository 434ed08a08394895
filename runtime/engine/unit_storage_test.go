package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// measure is one pass of the storage service, driven by the test.
func (b *testBundle) measure(t *testing.T) map[string]int64 {
	t.Helper()
	h := storageHost{b.eng}
	used, err := h.Measure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	h.Publish(used)
	return used
}

// An owner whose runs and events store what its storage quota allows is
// refused new starts and events with E_OWNER_QUOTA, naming the figures;
// another owner is not, and an owner with no quota is never measured
// against one.
func TestUnitOwnerStorageQuota(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{Owners: map[string]OwnerShare{"alice": {StorageBytes: 4 << 10}}}, unitOwnerSrc)
	big := `{"pad": "` + strings.Repeat("x", 3<<10) + `"}`
	start := func(owner string) error {
		_, err := b.eng.Submit(context.Background(), StartRequest{Owner: owner, Flow: "quick", Input: json.RawMessage(big)})
		return err
	}
	for _, owner := range []string{"alice", "bob"} {
		if err := start(owner); err != nil {
			t.Fatalf("%s's first start: %v", owner, err)
		}
	}
	if used := b.measure(t); used["alice"] < 3<<10 || used["bob"] < 3<<10 {
		t.Fatalf("measured %v, want each owner's 3 KiB input counted", used)
	}
	// Below the quota still: the next start passes and passes it.
	if err := start("alice"); err != nil {
		t.Fatalf("alice below her quota: %v", err)
	}
	b.measure(t)
	ee := refusedWith(t, start("alice"), CodeOwnerQuota)
	if !containsAll(ee.Message, `"alice"`, "storage quota is 4.0 KiB") {
		t.Errorf("the refusal does not name the owner and the quota: %s", ee.Message)
	}
	_, err := b.eng.Ops().EventSend(context.Background(), EventSendParams{Owner: "alice", ID: "e1", Name: "x.y"})
	refusedWith(t, err, CodeOwnerQuota)
	for range 3 {
		if err := start("bob"); err != nil {
			t.Fatalf("bob refused for alice's storage: %v", err)
		}
	}
	if _, err := b.eng.Ops().EventSend(context.Background(), EventSendParams{Owner: "bob", ID: "e1", Name: "x.y"}); err != nil {
		t.Fatalf("bob's event refused: %v", err)
	}
}

// With no storage quota anywhere the service measures nothing (it reads
// every run), and an owner without a quota is never refused for what it
// stores.
func TestUnitStorageNotMeasuredWithoutQuotas(t *testing.T) {
	t.Parallel()
	b := setupUnit(t, Config{}, unitOwnerSrc)
	if (storageHost{b.eng}).Needed() {
		t.Fatal("no owner has a storage quota, yet the service would measure")
	}
	b.eng.owners.storage.set(map[string]int64{"alice": 1 << 30}, b.clock.Now())
	if err := b.eng.owners.checkStorage("alice", b.eng.cfg.Load().ShareOf("alice")); err != nil {
		t.Fatalf("an owner without a quota refused for its storage: %v", err)
	}
}
