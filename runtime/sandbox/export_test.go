package sandbox

// WaitingCalls is how many Calls wait in p's lines for a worker.
func WaitingCalls(p *Pool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, line := range p.waiting {
		n += len(line)
	}
	return n
}

// WaitingForWorker is how many evaluations wait for a worker: each Call
// in a line, each Analyze and each validation.
func WaitingForWorker(p *Pool) int { return p.slots.Waiting() }

// ObserveBatches has f told the owners of the Calls of every batch of
// more than one that p sends; set it before p is used.
func ObserveBatches(p *Pool, f func(owners []string)) { p.batchHook = f }
