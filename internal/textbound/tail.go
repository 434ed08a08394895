package textbound

import (
	"io"
	"sync"
)

// Tail is a writer that keeps the last bytes written to it, up to a
// bound: what a process printed last, to explain how it ended, however
// much it printed. It is safe for concurrent use (a process's stdout and
// stderr may share one).
type Tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

// NewTail returns a Tail that keeps the last max bytes.
func NewTail(max int) *Tail { return &Tail{max: max} }

func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

// String is what the tail holds, as written: its first rune may be cut.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

var _ io.Writer = (*Tail)(nil)
