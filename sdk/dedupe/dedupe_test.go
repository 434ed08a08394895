package dedupe_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/weirhq/weir/sdk/dedupe"
)

func TestDoRunsOncePerKeyAcrossStores(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "dedupe", "memo.put")
	runs := 0
	work := func() (any, error) { runs++; return map[string]int{"run": runs}, nil }

	out, replayed, err := (&dedupe.Store{Dir: dir}).Do("k1", "fp", work)
	if err != nil || replayed || string(out) != `{"run":1}` {
		t.Fatalf("first attempt: %s %v %v", out, replayed, err)
	}
	// A new Store over the same directory is what a restarted plugin has.
	out, replayed, err = (&dedupe.Store{Dir: dir}).Do("k1", "fp", work)
	if err != nil || !replayed || string(out) != `{"run":1}` || runs != 1 {
		t.Fatalf("retry: %s %v %v after %d runs", out, replayed, err, runs)
	}
	if _, _, err := (&dedupe.Store{Dir: dir}).Do("k1", "other input", work); !errors.Is(err, dedupe.ErrKeyReused) {
		t.Fatalf("a key reused for other input: %v, want ErrKeyReused", err)
	}
	if _, replayed, _ := (&dedupe.Store{Dir: dir}).Do("k2", "fp", work); replayed || runs != 2 {
		t.Fatalf("another key replayed (%v) or did not run (%d runs)", replayed, runs)
	}
}

func TestDoStoresNothingOnFailureOrWithoutKey(t *testing.T) {
	t.Parallel()
	s := &dedupe.Store{Dir: t.TempDir()}
	boom := errors.New("boom")
	if _, _, err := s.Do("k", "fp", func() (any, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("error %v, want the work's own", err)
	}
	out, replayed, err := s.Do("k", "fp", func() (any, error) { return "second", nil })
	if err != nil || replayed || string(out) != `"second"` {
		t.Fatalf("after a failure the next attempt got %s %v %v, want a fresh run", out, replayed, err)
	}
	runs := 0
	for range 2 {
		if _, replayed, err := s.Do("", "fp", func() (any, error) { runs++; return runs, nil }); err != nil || replayed {
			t.Fatalf("empty key: %v %v", replayed, err)
		}
	}
	if runs != 2 {
		t.Fatalf("an empty key deduped: %d runs, want 2", runs)
	}
}

func TestWriteFileAtomicReplaces(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "state")
	for _, content := range []string{"one", "two"} {
		if err := dedupe.WriteFileAtomic(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != content {
			t.Fatalf("read %q %v, want %q", b, err, content)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("%d files in the directory, want only the target", len(entries))
	}
	if err := dedupe.WriteFileAtomic(filepath.Join(dir, "g"), []byte("x"), 0o640); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, "g")); err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v (%v), want 0640", st.Mode().Perm(), err)
	}
	if err := dedupe.WriteFileAtomic(filepath.Join(dir, "missing", "f"), []byte("x"), 0o600); err == nil {
		t.Error("a write into a missing directory succeeded")
	}
}
