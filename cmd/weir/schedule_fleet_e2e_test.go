package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir/internal/testutil"
	"github.com/weirhq/weir/runtime/api/apitypes"
)

// scheduleFleetTicks is how many ticks TestScheduleFleetEachTickOnce
// waits for: a few dozen seconds in make test, the 100 in make
// fleet.
var scheduleFleetTicks = flag.Int("schedule-fleet-ticks", 20, "ticks TestScheduleFleetEachTickOnce fires (make fleet: 100)")

// hostID is the id the daemon holds service leases under (its data
// directory's host-id).
func (d *daemon) hostID() string {
	d.t.Helper()
	b, err := os.ReadFile(filepath.Join(d.data, "host-id"))
	if err != nil {
		d.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// scheduleLeaseHolder waits until a daemon of ds holds the schedules
// service lease, unexpired, in the fleet's database at u, and returns it.
func scheduleLeaseHolder(t *testing.T, u string, ds []*daemon) *daemon {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var holder *daemon
	testutil.Eventually(t, 30*time.Second, func() error {
		var id string
		var expires time.Time
		err := conn.QueryRow(ctx, `SELECT d->>'holder', (d->>'expires')::timestamptz
			FROM (SELECT convert_from(data, 'UTF8')::jsonb AS d FROM service_leases WHERE name = 'schedules') l`).Scan(&id, &expires)
		if errors.Is(err, pgx.ErrNoRows) {
			return errors.New("no daemon has taken the schedules lease")
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.hostID() == id && expires.After(time.Now()) {
				holder = d
				return nil
			}
		}
		return fmt.Errorf("the schedules lease is %s's until %s, not a live daemon's", id, expires)
	})
	return holder
}

// TestScheduleFleetEachTickOnce runs two daemons on one PostgreSQL schema
// with one every="1s" schedule, and kills the daemon holding the
// schedules lease (SIGKILL) halfway. The survivor takes the lease once it
// expires (a few seconds), and its first pass fires every tick since the
// last one stored, all within the grace: across both daemons every tick
// from the first has exactly one run, with no gap at the takeover, and
// every run ends completed (the killed daemon's own are rescued).
func TestScheduleFleetEachTickOnce(t *testing.T) {
	e2e(t, "starts and kills real daemons on PostgreSQL")
	n := *scheduleFleetTicks
	ds, u := fleet(t, 2)
	ds[0].register(crashScheduleFlow)
	ds[0].waitTicks("beat", n/2, time.Duration(n)*time.Second+time.Minute)
	holder := scheduleLeaseHolder(t, u, ds)
	survivor := ds[0]
	if survivor == holder {
		survivor = ds[1]
	}
	holder.kill()
	killed := time.Now()
	runs := survivor.waitTicks("beat", n, time.Duration(n)*time.Second+time.Minute)
	if scheduleLeaseHolder(t, u, ds) != survivor {
		t.Fatalf("the schedules lease is not the survivor's")
	}
	eachTickOnce(t, runs)
	if last := runs[len(runs)-1].tick; !last.After(killed.Add(2 * time.Second)) {
		t.Errorf("the last tick %s is not the survivor's: the kill was at %s", last, killed)
	}
	s := survivor.schedule("beat")
	if want := s.CreatedAt.Truncate(time.Second).Add(time.Second); !runs[0].tick.Equal(want) {
		t.Errorf("the first tick with a run is %s, want %s, the first after the registration", runs[0].tick, want)
	}
	for _, f := range s.Firings {
		if f.Skipped != "" {
			t.Errorf("beat skipped %s: %s", f.Tick, f.Skipped)
		}
	}
	for _, r := range runs {
		if v := survivor.waitTerminal(r.run.ID); v.Phase != apitypes.PhaseCompleted {
			t.Errorf("tick %s's run ended %s %+v", r.tick, v.Phase, v.Error)
		}
	}
	survivor.stop()
}
