package sandbox

// WaitingCalls is how many Calls wait in p's line for a worker.
func WaitingCalls(p *Pool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.waiting)
}
