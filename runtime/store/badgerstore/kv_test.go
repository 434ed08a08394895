package badgerstore

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// TestScanMatchesModel drives random writes, deletes, point reads and
// range scans from concurrent Updates (so they share group commits), some
// of which fail, and checks every read inside a function against a model
// of what that function must see: the committed state, the writes of
// earlier successful functions of its group, and its own writes. Filler
// values make Badger flush memtables to tables along the way.
func TestScanMatchesModel(t *testing.T) {
	t.Parallel()
	s := openStore(t, Options{MemTableSize: 1 << 20, MaxBatch: 16})
	keys := make([]string, 40)
	for i := range keys {
		keys[i] = fmt.Sprintf("z/%02d", i)
	}
	filler := []byte(strings.Repeat("f", 2<<10))

	// model is only touched by the functions, which the committer runs one
	// at a time, and by this goroutine after every Update returned.
	model := map[string]string{}
	const goroutines, each = 8, 200
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				rng := rand.New(rand.NewPCG(uint64(g), uint64(i)))
				fail := rng.IntN(4) == 0
				err := s.Update(ctx, func(tx store.Tx) error {
					kv := tx.(*storeTx).kv
					local := maps.Clone(model)
					for op := range 1 + rng.IntN(8) {
						k := keys[rng.IntN(len(keys))]
						switch rng.IntN(4) {
						case 0:
							v := fmt.Sprintf("g%d-i%d-op%d", g, i, op)
							local[k] = v
							if err := kv.set([]byte(k), []byte(v)); err != nil {
								return err
							}
						case 1:
							delete(local, k)
							if err := kv.del([]byte(k)); err != nil {
								return err
							}
						case 2:
							b, err := kv.get([]byte(k))
							want, ok := local[k]
							if ok != (err == nil) || (ok && string(b) != want) || (!ok && !errors.Is(err, errNoKey)) {
								return fmt.Errorf("get %s = %q, %v; want %q, %v", k, b, err, want, ok)
							}
						case 3:
							lo, hi := keys[rng.IntN(len(keys))], keys[rng.IntN(len(keys))]
							if lo > hi {
								lo, hi = hi, lo
							}
							if err := checkScan(kv, local, lo, hi); err != nil {
								return err
							}
						}
					}
					if err := kv.set(fmt.Appendf(nil, "y/%d/%d", g, i), filler); err != nil {
						return err
					}
					if fail {
						return errBoom
					}
					model = local
					return nil
				})
				if fail != errors.Is(err, errBoom) || (!fail && err != nil) {
					errs <- fmt.Errorf("goroutine %d update %d (fail %v): %w", g, i, fail, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	err := s.View(ctx, func(tx store.Tx) error {
		return checkScan(tx.(*storeTx).kv, model, "z/", "z0")
	})
	if err != nil {
		t.Fatalf("committed state: %v", err)
	}
	if st := s.Stats(); st.Commits >= st.Updates {
		t.Fatalf("%d commits for %d updates: no group shared a commit", st.Commits, st.Updates)
	}
}

// checkScan compares kv.scan over [lo, hi) with the model.
func checkScan(kv *kv, model map[string]string, lo, hi string) error {
	var got []string
	err := kv.scan([]byte(lo), []byte(hi), false, func(k, v []byte) (bool, error) {
		got = append(got, string(k)+"="+string(v))
		return true, nil
	})
	if err != nil {
		return err
	}
	var want []string
	for _, k := range slices.Sorted(maps.Keys(model)) {
		if k >= lo && k < hi {
			want = append(want, k+"="+model[k])
		}
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("scan [%s, %s):\n got  %v\n want %v", lo, hi, got, want)
	}
	return nil
}

func TestLayerOrderAndEstimate(t *testing.T) {
	t.Parallel()
	l := newLayer(100)
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[string]write{}
	for range 2000 {
		k := fmt.Sprintf("k%04d", rng.IntN(1000))
		w := write{val: make([]byte, rng.IntN(200))}
		if rng.IntN(5) == 0 {
			w = write{del: true}
		}
		l.put(k, w)
		want[k] = w
	}
	var got []string
	var size int64
	_ = l.each(func(k string, w write) error {
		got = append(got, k)
		v := int64(len(w.val))
		if v >= 100 {
			v = 12
		}
		size += int64(len(k)) + v + 12
		return nil
	})
	if !slices.Equal(got, slices.Sorted(maps.Keys(want))) {
		t.Fatalf("layer order: %d keys, want %d sorted", len(got), len(want))
	}
	if l.count != int64(len(want)) || l.size != size {
		t.Fatalf("estimate: count %d size %d, want %d and %d", l.count, l.size, len(want), size)
	}
	for _, probe := range []string{"", "k0500", "k05000", "k9999"} {
		n := l.seek(probe)
		i, _ := slices.BinarySearch(got, probe)
		if (n == nil) != (i == len(got)) || (n != nil && n.key != got[i]) {
			t.Fatalf("seek(%q) wrong", probe)
		}
	}
}

func TestTimeKeyOrder(t *testing.T) {
	t.Parallel()
	ts := []string{
		"0001-01-01T00:00:00Z", "1600-01-01T00:00:00Z", "1969-12-31T23:59:59.999999999Z",
		"1970-01-01T00:00:00Z", "1970-01-01T00:00:00.000000001Z", "2026-03-04T05:06:07.5Z", "2300-01-01T00:00:00Z",
	}
	prev := ""
	for _, s := range ts {
		tm := mustTime(t, s)
		k := timeKey(tm)
		if len(k) != timeKeyLen || k <= prev {
			t.Fatalf("timeKey(%s) does not sort after the time before it", s)
		}
		prev = k
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}
