package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir/internal/testutil/pgtest"
	"github.com/weirhq/weir/runtime/api/apitypes"
)

// A fleet soak (-fleet N) runs N daemons sharing one PostgreSQL schema
// instead of one daemon on its own Badger store. Each daemon has a slot: a
// data directory of its own, so its plugins' state (the mail outbox, the
// notes store) is its host's, kept across its restarts. Every slot is
// killed and restarted on its own; the workload is spread over the live
// daemons' sockets, so a request re-sent to another daemon meets the
// fleet's dedup, and a subflow's child may end on another daemon than the
// one its parent goes on with.

// EnvStore names the database of a fleet soak when -store is not given.
const EnvStore = "WEIR_SOAK_STORE"

// fleetLease is the fleet's lease timeout: a restarted daemon of a fleet
// does not take back its old leases, the fleet rescues them once they
// expire, so this bounds how long a killed daemon's runs wait. Shorter
// leases let renewals that a loaded 2-core machine delays by seconds
// expire live daemons' leases, and five lost leases fail a run
// (E_ATTEMPTS_EXCEEDED), which the soak counts against the kills.
const fleetLease = 10 * time.Second

// soakStore is the database a fleet soak makes its schema in: -store, or
// WEIR_SOAK_STORE, or the project's test database.
func soakStore(flagValue string) string {
	switch {
	case flagValue != "":
		return flagValue
	case os.Getenv(EnvStore) != "":
		return os.Getenv(EnvStore)
	}
	return pgtest.DefaultURL
}

// checkFleet refuses a fleet the soak cannot run: one daemon is the
// default soak on Badger (-fleet 0), a fleet has at least two.
func checkFleet(fleet int, store string, storeSet bool) error {
	switch {
	case fleet < 0 || fleet == 1:
		return fmt.Errorf("-fleet %d: a fleet is 2 or more daemons (0, the default, runs one daemon on its own store)", fleet)
	case fleet > maxFleet:
		return fmt.Errorf("-fleet %d: at most %d daemons (each holds about 10 PostgreSQL connections)", fleet, maxFleet)
	case fleet == 0 && storeSet:
		return fmt.Errorf("-store is the database of a fleet: give -fleet N too")
	case fleet > 0:
		u, err := url.Parse(store)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			return fmt.Errorf("-store %q: want a postgres:// URL", redactURL(store))
		}
	}
	return nil
}

// maxFleet bounds -fleet: every daemon takes its pool and two sessions
// out of max_connections (100 by default).
const maxFleet = 8

// schema is a fresh PostgreSQL schema for one fleet soak.
type schema struct {
	base, name string
	// URL is base with search_path set to the schema: the daemons' store.
	URL string
}

// newSchema creates an empty schema named weir_soak_<random> in the
// database of base.
func newSchema(ctx context.Context, base string) (*schema, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	s := &schema{base: base, name: "weir_soak_" + hex.EncodeToString(b[:])}
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("-store: %w", err)
	}
	q := u.Query()
	q.Set("search_path", s.name)
	u.RawQuery = q.Encode()
	s.URL = u.String()
	return s, s.exec(ctx, "CREATE SCHEMA "+s.name)
}

// Drop removes the schema and everything the fleet wrote in it.
func (s *schema) Drop(ctx context.Context) error {
	return s.exec(ctx, "DROP SCHEMA "+s.name+" CASCADE")
}

func (s *schema) exec(ctx context.Context, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.base)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", redactURL(s.base), err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(the store URL)"
	}
	return u.Redacted()
}

// slotData is slot n's data directory under the soak's.
func slotData(data string, n int) string {
	return filepath.Join(data, fmt.Sprintf("daemon-%d", n))
}

// holderRE finds the holder id a daemon's leases carry in its start's
// "recovered" log line.
var holderRE = regexp.MustCompile(`recovered: holder=(\S+)`)

// holderOf is the holder id in a daemon's log, or "".
func holderOf(log string) string {
	m := holderRE.FindStringSubmatch(log)
	if m == nil {
		return ""
	}
	return m[1]
}

// Invariant names of a fleet soak only.
const (
	invCrossWake = "a child on one daemon woke its parent on another"
	invHolders   = "every daemon of the fleet named its lease holder"
)

// wakeTally counts subflow parents that went on after their child ended,
// and those that went on on another daemon than the one the child ended on.
type wakeTally struct {
	resumed, across int
}

// tallyWakes reads each subflow parent's timeline: the holder of its first
// lease after it parked for its child is the daemon its child's end woke;
// the holder of the child's last lease is the daemon the child ended on.
// Holders map to daemons (slots) through the records' hostOf; a daemon restarted in
// its slot is the same daemon, as an operator's is.
func tallyWakes(f *final) wakeTally {
	var t wakeTally
	for parentID, kids := range f.children {
		for _, c := range kids {
			if !c.Phase.Terminal() {
				continue
			}
			childSlot, ok := f.records.hostOf[lastHolder(f.events[c.ID])]
			if !ok {
				continue
			}
			woken := resumedBy(f.events[parentID], c.ID)
			if woken == "" {
				continue
			}
			parentSlot, ok := f.records.hostOf[woken]
			if !ok {
				continue
			}
			t.resumed++
			if parentSlot != childSlot {
				t.across++
			}
		}
	}
	return t
}

// lastHolder is the holder of a timeline's last lease.
func lastHolder(evs []apitypes.Event) string {
	h := ""
	for _, e := range evs {
		if e.Type == "leased" {
			h, _ = e.Detail["holder"].(string)
		}
	}
	return h
}

// resumedBy is the holder of a parent's first lease after it parked for
// child, or "" if it never went on.
func resumedBy(evs []apitypes.Event, child string) string {
	parked := false
	for _, e := range evs {
		switch {
		case e.Type == "waiting" && e.Detail["for"] == "child" && e.Detail["child"] == child:
			parked = true
		case parked && e.Type == "leased":
			h, _ := e.Detail["holder"].(string)
			return h
		}
	}
	return ""
}

// checkCrossWake: a fleet's wake-ups cross daemons. At least one subflow
// child ended on one daemon and its parent went on on another: a fleet
// whose parents only ever resumed where their child ended has not shown
// that a child's end reaches the other daemons.
func checkCrossWake(w *world, f *final) []string {
	t := tallyWakes(f)
	if t.across == 0 {
		return []string{fmt.Sprintf("of %d subflow parents that went on after their child ended, none went on on another daemon than the child's", t.resumed)}
	}
	return nil
}

func crossWakeSummary(w *world, f *final) string {
	t := tallyWakes(f)
	return fmt.Sprintf("%d subflow parents went on after their child ended, %d on another daemon than the child's", t.resumed, t.across)
}

// fleetInvariants are checked on a fleet besides every invariant of the
// soak. The holders' violations are found as the daemons start.
var fleetInvariants = []invariant{
	{invHolders, func(w *world, f *final) []string { return nil }, func(w *world, f *final) string {
		return fmt.Sprintf("%d daemon processes, each leasing under a holder of its own", len(f.records.hostOf))
	}},
	{invCrossWake, checkCrossWake, crossWakeSummary},
}

// invariantsOf lists the invariants a soak of cfg checks.
func invariantsOf(cfg Config) []invariant {
	if cfg.Fleet == 0 {
		return invariants
	}
	return append(append([]invariant(nil), invariants...), fleetInvariants...)
}
