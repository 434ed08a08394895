package engine

// OwnerShare is one owner's share of the daemon and its quotas (an owner
// is what identity gives: a uid's user name on the socket, a token's name
// on TCP; docs/design.md §8.2). Zero fields take the defaults named.
type OwnerShare struct {
	// Weight is the owner's share of the worker slots while owners
	// contend for them (default 1): weights 2 and 1 get 2:1 of the slots.
	Weight int
	// MaxRunning caps the owner's runs started and not ended (0: none).
	MaxRunning int
	// MaxQueued caps the owner's runs accepted and not yet started (0:
	// only the daemon's MaxQueued).
	MaxQueued int
	// BudgetPerHour caps the cost units the owner's runs spend in an
	// hour (0: none).
	BudgetPerHour int64
	// StorageBytes caps what the owner's versions, results and events
	// take in the store (0: none).
	StorageBytes int64
}

// ShareOf is owner's share: its own entry in Owners, else DefaultOwner.
func (c *Config) ShareOf(owner string) OwnerShare {
	s, ok := c.Owners[owner]
	if !ok {
		s = c.DefaultOwner
	}
	if s.Weight <= 0 {
		s.Weight = 1
	}
	return s
}
