package cluster

import "fmt"

// ListedError is Forget's refusal of a member this node's view lists: it
// is not lost, whatever its state (alive, suspect and draining members run;
// a dead one counts as dead until the dead grace forgets it; one that left
// counts no more).
type ListedError struct {
	Name  string
	State MemberState
	// Self: the name is this node's own.
	Self bool
}

func (e *ListedError) Error() string {
	switch {
	case e.Self:
		return fmt.Sprintf("%s is this node", e.Name)
	case e.State == StateLeft:
		return fmt.Sprintf("%s left the cluster: it counts no more", e.Name)
	case e.State == StateDead:
		return fmt.Sprintf("%s is dead in this node's view: it counts as dead until the dead grace forgets it, and only then as lost", e.Name)
	}
	return fmt.Sprintf("%s is %s in this node's view, not lost", e.Name, e.State)
}

// Forget strikes member name off the lost members (Lost) on an operator's
// word that it is gone for good, and drops it from the members last known,
// so a restart does not count it lost again. It reports whether name was
// lost here. A member of that name that comes back later is a new member,
// as any that joins: it counts once its links are up (InSync), and if it
// is lost again it counts again. Forget refuses a member the view lists
// (*ListedError).
//
// The lost rule is what keeps a node cut off from the rest from answering
// on its own: forgetting a member that is alive on the other side of a
// partition lets both sides answer. Only the operator can know the
// difference.
func (c *Cluster) Forget(name string) (bool, error) {
	if err := c.writable(); err != nil {
		return false, err
	}
	if name == c.cfg.Name {
		return false, &ListedError{Name: name, State: StateAlive, Self: true}
	}
	if m, ok := c.view.get(name); ok {
		return false, &ListedError{Name: name, State: m.State}
	}
	l := c.repl.leases
	l.mu.Lock()
	_, was := l.lost[name]
	delete(l.lost, name)
	l.mu.Unlock()
	c.mu.Lock()
	known := c.known
	c.mu.Unlock()
	err := known.forget(name)
	if m, ok := c.view.get(name); ok {
		// It joined meanwhile: being heard strikes it off anyway, and its
		// address belongs in the members last known.
		known.observe(m)
	}
	if err != nil {
		return was, fmt.Errorf("struck %s off, but removing it from the members last known failed, so a restart will count it lost again: %w", name, err)
	}
	return was, nil
}
