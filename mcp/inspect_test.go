package mcp

// What the tests inspect of the front's node-local state, which the front
// itself never asks.

// known reports whether connection id is registered here.
func (t *connTable) known(id string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	_, ok := t.conns[id]
	return ok
}

// out returns connection id's stream here, or nil.
func (t *connTable) out(id string) sink {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if c, ok := t.conns[id]; ok {
		return c.out
	}
	return nil
}

// pending counts the parked calls.
func (pk *parking) pending() int {
	pk.mu.Lock()
	defer pk.mu.Unlock()
	return len(pk.calls)
}
