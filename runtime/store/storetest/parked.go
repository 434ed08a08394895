package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/weirhq/weir/runtime/store"
)

// testRunParked: the index of parked runs holds exactly the runs in
// PhaseWaiting, grouped by flow, version and position, follows phase,
// version and position changes and deletes (inside the transaction that
// makes them too), pages groups and ids, and lists nothing of another
// flow.
func testRunParked(t *testing.T, s store.Store, _ Opener) {
	type run struct {
		id, flow, version, position string
		phase                       store.Phase
	}
	runs := []run{
		{"a1", "f", "v1", "n1:x", store.PhaseWaiting},
		{"a2", "f", "v1", "n1:x", store.PhaseWaiting},
		{"a3", "f", "v1", "n2:y", store.PhaseWaiting},
		{"a4", "f", "v2", "n1:x", store.PhaseWaiting},
		{"a5", "f", "v1", "n1:x", store.PhaseRunning},
		{"a6", "f", "v1", "", store.PhaseWaiting},
		{"b1", "g", "v1", "n1:x", store.PhaseWaiting},
		{"b2", "ff", "v1", "n1:x", store.PhaseWaiting},
	}
	update(t, s, func(tx store.Tx) error {
		for _, r := range runs {
			if err := tx.RunInsert(&store.Run{ID: r.id, Owner: "o", Flow: r.flow, Version: r.version, Position: r.position, Phase: r.phase}); err != nil {
				return err
			}
		}
		return wantParked(tx, "f", []store.ParkedGroup{pg("v1", "", "a6"), pg("v1", "n1:x", "a1"), pg("v1", "n2:y", "a3"), pg("v2", "n1:x", "a4")},
			map[string][]string{"v1/n1:x": {"a1", "a2"}, "v1/": {"a6"}, "v2/n1:x": {"a4"}, "v2/n2:y": nil})
	})
	view(t, s, func(tx store.Tx) error {
		if err := wantParked(tx, "g", []store.ParkedGroup{pg("v1", "n1:x", "b1")}, map[string][]string{"v1/n1:x": {"b1"}}); err != nil {
			return err
		}
		if err := wantParked(tx, "nothing", nil, nil); err != nil {
			return err
		}
		// Paging: the groups after a cursor, at most a limit; ids after one.
		gs, err := tx.RunParkedGroups(store.RunParkedGroupsParams{Flow: "f", After: &store.ParkedGroupCursor{Version: "v1", Position: "n1:x"}, Limit: 1})
		if err != nil {
			return err
		}
		if want := []store.ParkedGroup{pg("v1", "n2:y", "a3")}; !slices.Equal(gs, want) {
			return fmt.Errorf("groups after v1/n1:x, limit 1: %v, want %v", gs, want)
		}
		ids, err := tx.RunParkedList(store.RunParkedListParams{Flow: "f", Version: "v1", Position: "n1:x", After: "a1", Limit: 1})
		if err != nil {
			return err
		}
		if !slices.Equal(ids, []string{"a2"}) {
			return fmt.Errorf("ids after a1: %v, want [a2]", ids)
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		// a1 wakes, a3 moves to another position, a4 to another
		// version (a migration), a5 parks, a6 is deleted.
		if err := ChangeRun(tx, "a1", func(r *store.Run) { r.Phase = store.PhaseRunning }); err != nil {
			return err
		}
		if err := ChangeRun(tx, "a3", func(r *store.Run) { r.Position = "n3:z" }); err != nil {
			return err
		}
		if err := ChangeRun(tx, "a4", func(r *store.Run) { r.Version = "v3" }); err != nil {
			return err
		}
		if err := ChangeRun(tx, "a5", func(r *store.Run) { r.Phase = store.PhaseWaiting }); err != nil {
			return err
		}
		if err := tx.RunDelete("a6"); err != nil {
			return err
		}
		return wantParked(tx, "f", []store.ParkedGroup{pg("v1", "n1:x", "a2"), pg("v1", "n3:z", "a3"), pg("v3", "n1:x", "a4")},
			map[string][]string{"v1/n1:x": {"a2", "a5"}, "v1/n2:y": nil, "v2/n1:x": nil, "v1/": nil})
	})
	view(t, s, func(tx store.Tx) error {
		return wantParked(tx, "f", []store.ParkedGroup{pg("v1", "n1:x", "a2"), pg("v1", "n3:z", "a3"), pg("v3", "n1:x", "a4")},
			map[string][]string{"v1/n1:x": {"a2", "a5"}, "v1/n2:y": nil, "v2/n1:x": nil})
	})
}

// wantParked checks flow's parked groups and the ids of some groups
// (version/position → ids).
func wantParked(tx store.Tx, flow string, groups []store.ParkedGroup, ids map[string][]string) error {
	gs, err := tx.RunParkedGroups(store.RunParkedGroupsParams{Flow: flow})
	if err != nil {
		return err
	}
	if !slices.Equal(gs, groups) {
		return fmt.Errorf("parked groups of %s: %v, want %v", flow, gs, groups)
	}
	for g, want := range ids {
		version, position, _ := strings.Cut(g, "/")
		got, err := tx.RunParkedList(store.RunParkedListParams{Flow: flow, Version: version, Position: position})
		if err != nil {
			return err
		}
		if len(got) != len(want) || (len(want) > 0 && !slices.Equal(got, want)) {
			return fmt.Errorf("parked runs of %s %s: %v, want %v", flow, g, got, want)
		}
	}
	return nil
}

func pg(version, position, first string) store.ParkedGroup {
	return store.ParkedGroup{Version: version, Position: position, First: first}
}
