package badgerstore

import (
	"bytes"
	"errors"
	"slices"

	"github.com/dgraph-io/badger/v4"

	"github.com/weirhq/weir/runtime/store"
)

// A write is one pending change to a key: a value, or a deletion.
type write struct {
	val []byte
	del bool
}

// kv is the key-value view one Tx works through. Reads look, newest
// first, at the fn's own writes (own), the write layers of the group
// commits not yet durable (layers: the batch being built, then the one
// being committed), and the committed state (snap, a Badger read-only
// snapshot). In a View, own and layers are nil.
//
// Only the committer goroutine touches own and layers, so nothing here is
// locked.
type kv struct {
	snap     *badger.Txn
	layers   []*layer
	own      map[string]write
	readOnly bool

	// visited counts committed keys consumed by scans; tests use it to
	// show a scan stopped at its bound.
	visited int
}

// errNoKey is the internal "absent" answer of kv.get; Tx methods turn it
// into store.ErrNotFound or a zero value.
var errNoKey = errors.New("badgerstore: no such key")

// pending returns the newest uncommitted write of k, if any.
func (s *kv) pending(k []byte) (write, bool) {
	w, ok := s.own[string(k)]
	for i := 0; !ok && i < len(s.layers); i++ {
		w, ok = s.layers[i].get(string(k))
	}
	return w, ok
}

// get returns the value of k. The slice must not be changed; callers that
// hand bytes out copy them.
func (s *kv) get(k []byte) ([]byte, error) {
	if w, ok := s.pending(k); ok {
		if w.del {
			return nil, errNoKey
		}
		return w.val, nil
	}
	item, err := s.snap.Get(k)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, errNoKey
	}
	if err != nil {
		return nil, err
	}
	return item.ValueCopy(nil)
}

// lookup returns a get for many keys of [lower, upper) asked for in
// ascending order, such as the records an index scan names. It walks one
// iterator over the committed state, stepping forward to the next key when
// it is near and seeking when it is not, instead of a point lookup through
// every level per key. Keys out of order are still found (by a seek).
// done must be called when finished.
func (s *kv) lookup(lower, upper []byte) (get func(k []byte) ([]byte, error), done func()) {
	var it *badger.Iterator
	get = func(k []byte) ([]byte, error) {
		if w, ok := s.pending(k); ok {
			if w.del {
				return nil, errNoKey
			}
			return w.val, nil
		}
		if it == nil {
			it = s.snap.NewIterator(badger.IteratorOptions{Prefix: commonPrefix(lower, upper)})
			it.Seek(k)
		} else if it.Valid() && bytes.Compare(it.Item().Key(), k) > 0 {
			it.Seek(k) // asked out of order
		} else {
			for n := 0; it.Valid() && bytes.Compare(it.Item().Key(), k) < 0; n++ {
				if n == 8 {
					it.Seek(k)
					break
				}
				it.Next()
			}
		}
		if !it.Valid() || !bytes.Equal(it.Item().Key(), k) {
			return nil, errNoKey
		}
		return it.Item().ValueCopy(nil)
	}
	done = func() {
		if it != nil {
			it.Close()
		}
	}
	return get, done
}

func (s *kv) has(k []byte) (bool, error) {
	_, err := s.get(k)
	if errors.Is(err, errNoKey) {
		return false, nil
	}
	return err == nil, err
}

func (s *kv) set(k, v []byte) error {
	if s.readOnly {
		return store.ErrReadOnly
	}
	s.own[string(k)] = write{val: v}
	return nil
}

func (s *kv) del(k []byte) error {
	if s.readOnly {
		return store.ErrReadOnly
	}
	s.own[string(k)] = write{del: true}
	return nil
}

// scan calls fn for every live key in [lower, upper) in ascending order,
// merging the sources: for a key present in several, the newest wins, and
// a deletion hides the key. upper nil means no upper bound. With keysOnly,
// fn gets a nil value. fn returns false to stop. fn must not write through
// s (collect first, then write).
func (s *kv) scan(lower, upper []byte, keysOnly bool, fn func(k, v []byte) (bool, error)) error {
	return s.scanSkip(lower, upper, keysOnly, func(k, v []byte) ([]byte, bool, error) {
		more, err := fn(k, v)
		return nil, more, err
	})
}

// scanSkip is scan whose fn may also name a key to go on from (skip, nil:
// the next key): every source seeks to it, so a walk that wants one key
// of each of many runs of keys (the parked index's groups) reads one key
// of each, on one iterator. skip must be past the key fn was given.
func (s *kv) scanSkip(lower, upper []byte, keysOnly bool, fn func(k, v []byte) (skip []byte, more bool, err error)) error {
	inRange := func(k string) bool {
		return k >= string(lower) && (upper == nil || k < string(upper))
	}

	// The fn's own writes: few, so sorted on demand.
	var own []string
	for k := range s.own {
		if inRange(k) {
			own = append(own, k)
		}
	}
	slices.Sort(own)

	// One cursor per layer, newest first.
	cursors := make([]*slNode, len(s.layers))
	for i, l := range s.layers {
		cursors[i] = l.seek(string(lower))
	}

	it := s.snap.NewIterator(badger.IteratorOptions{
		PrefetchValues: !keysOnly,
		PrefetchSize:   16,
		Prefix:         commonPrefix(lower, upper),
	})
	defer it.Close()
	it.Seek(lower)

	for {
		// The smallest key among the cursors.
		var k string
		found := false
		consider := func(c string) {
			if !found || c < k {
				k, found = c, true
			}
		}
		var snapKey []byte
		if it.Valid() {
			snapKey = it.Item().Key()
			if upper != nil && bytes.Compare(snapKey, upper) >= 0 {
				snapKey = nil
			} else {
				consider(string(snapKey))
			}
		}
		for i, c := range cursors {
			if c != nil && !inRange(c.key) {
				cursors[i] = nil
			} else if c != nil {
				consider(c.key)
			}
		}
		if len(own) > 0 {
			consider(own[0])
		}
		if !found {
			return nil
		}

		// The newest source holding k decides its value; every source at
		// k moves past it.
		var (
			val   []byte
			dead  bool
			taken bool
		)
		if len(own) > 0 && own[0] == k {
			w := s.own[k]
			val, dead, taken = w.val, w.del, true
			own = own[1:]
		}
		for i, c := range cursors {
			if c != nil && c.key == k {
				if !taken {
					val, dead, taken = c.w.val, c.w.del, true
				}
				cursors[i] = c.next[0]
			}
		}
		if snapKey != nil && string(snapKey) == k {
			if !taken && !keysOnly {
				v, err := it.Item().ValueCopy(nil)
				if err != nil {
					return err
				}
				val = v
			}
			it.Next()
			s.visited++
		}
		if dead {
			continue
		}
		if keysOnly {
			val = nil
		}
		skip, more, err := fn([]byte(k), val)
		if err != nil || !more {
			return err
		}
		if skip != nil {
			lower = skip
			i := 0
			for i < len(own) && own[i] < string(skip) {
				i++
			}
			own = own[i:]
			for i, l := range s.layers {
				cursors[i] = l.seek(string(skip))
			}
			it.Seek(skip)
		}
	}
}

// commonPrefix is the longest common prefix of lower and upper, which lets
// Badger skip tables that cannot hold a key of the range.
func commonPrefix(lower, upper []byte) []byte {
	if upper == nil {
		return nil
	}
	n := 0
	for n < len(lower) && n < len(upper) && lower[n] == upper[n] {
		n++
	}
	return lower[:n]
}

// layer holds the writes of every fn accepted into the current group
// commit, in key order (a skip list) with a map beside it for point reads.
// It also keeps Badger's own estimate of the transaction the layer will
// become, so the committer can commit before Badger would refuse it with
// ErrTxnTooBig.
type layer struct {
	head  slNode
	level int
	nodes map[string]*slNode
	rnd   uint64

	// Badger's accounting of a transaction (Txn.checkSize): one entry per
	// distinct key, and per key len(key)+len(val)+2 (or a value pointer's
	// 12 bytes when the value goes to the value log) plus 10 for the
	// version.
	count int64
	size  int64
	// vthreshold is Badger's ValueThreshold, which decides that split.
	vthreshold int64
}

const slMaxLevel = 20

type slNode struct {
	key  string
	w    write
	est  int64 // this key's share of layer.size
	next []*slNode
}

func newLayer(vthreshold int64) *layer {
	l := &layer{nodes: make(map[string]*slNode), rnd: 0x9e3779b97f4a7c15, level: 1, vthreshold: vthreshold}
	l.head.next = make([]*slNode, slMaxLevel)
	return l
}

func (l *layer) len() int {
	if l == nil {
		return 0
	}
	return len(l.nodes)
}

func (l *layer) get(k string) (write, bool) {
	if l == nil {
		return write{}, false
	}
	n, ok := l.nodes[k]
	if !ok {
		return write{}, false
	}
	return n.w, true
}

// seek returns the first node whose key is >= k, or nil.
func (l *layer) seek(k string) *slNode {
	if l == nil {
		return nil
	}
	x := &l.head
	for i := l.level - 1; i >= 0; i-- {
		for x.next[i] != nil && x.next[i].key < k {
			x = x.next[i]
		}
	}
	return x.next[0]
}

// estimate is Badger's size accounting for one key (see layer.size).
func (l *layer) estimate(k string, w write) int64 {
	v := int64(len(w.val))
	if v >= l.vthreshold {
		v = 12
	}
	return int64(len(k)) + v + 2 + 10
}

// grownBy says what count and size the layer would have after merging own.
func (l *layer) grownBy(own map[string]write) (count, size int64) {
	count, size = l.count, l.size
	for k, w := range own {
		e := l.estimate(k, w)
		if n, ok := l.nodes[k]; ok {
			size += e - n.est
			continue
		}
		count++
		size += e
	}
	return count, size
}

// merge applies an fn's writes; a later write to a key replaces an earlier.
func (l *layer) merge(own map[string]write) {
	for k, w := range own {
		l.put(k, w)
	}
}

func (l *layer) put(k string, w write) {
	e := l.estimate(k, w)
	if n, ok := l.nodes[k]; ok {
		l.size += e - n.est
		n.w, n.est = w, e
		return
	}
	var update [slMaxLevel]*slNode
	x := &l.head
	for i := l.level - 1; i >= 0; i-- {
		for x.next[i] != nil && x.next[i].key < k {
			x = x.next[i]
		}
		update[i] = x
	}
	lvl := l.randomLevel()
	if lvl > l.level {
		for i := l.level; i < lvl; i++ {
			update[i] = &l.head
		}
		l.level = lvl
	}
	n := &slNode{key: k, w: w, est: e, next: make([]*slNode, lvl)}
	for i := 0; i < lvl; i++ {
		n.next[i] = update[i].next[i]
		update[i].next[i] = n
	}
	l.nodes[k] = n
	l.count++
	l.size += e
}

// randomLevel draws a level with P(level > n) = 4^-n (xorshift64).
func (l *layer) randomLevel() int {
	l.rnd ^= l.rnd << 13
	l.rnd ^= l.rnd >> 7
	l.rnd ^= l.rnd << 17
	r := l.rnd
	lvl := 1
	for lvl < slMaxLevel && r&3 == 0 {
		lvl++
		r >>= 2
	}
	return lvl
}

// each visits the layer's writes in key order.
func (l *layer) each(fn func(k string, w write) error) error {
	for n := l.head.next[0]; n != nil; n = n.next[0] {
		if err := fn(n.key, n.w); err != nil {
			return err
		}
	}
	return nil
}
