package mcpswarm

// NetworkOf returns the Network n runs on (nil: sockets), so a test's
// clients can reach a node that has no socket.
func NetworkOf(n *Node) Network { return n.opts.network }

// RecordedStandbys returns the in-sync standbys of session id as n's
// copy of the session's record names them: the set a failover acts on.
func RecordedStandbys(n *Node, id string) []string {
	info, _ := n.swarm.Lookup(id)
	return info.Standbys
}

// Incarnation returns the origin (name@epoch) under which n knows member
// name, "" when it does not: it changes each time the member restarts.
func Incarnation(n *Node, name string) string {
	m, ok := n.cluster.Member(name)
	if !ok {
		return ""
	}
	return m.Origin.String()
}

// MemberState returns the state in which n sees member name ("alive",
// "suspect", "dead", ...), "" when it does not know it.
func MemberState(n *Node, name string) string {
	m, ok := n.cluster.Member(name)
	if !ok {
		return ""
	}
	return m.State.String()
}

// StandbyCopies returns the sessions n holds a standby copy of.
func StandbyCopies(n *Node) []string {
	if n.replicas == nil {
		return nil
	}
	var ids []string
	for _, c := range n.replicas.holder.Copies() {
		ids = append(ids, c.Session)
	}
	return ids
}

// HoldsEntriesOf reports whether n still holds entries, visible or hidden,
// that origin (as Incarnation names it) wrote to registry reg: false once
// a dead member's partition is deleted.
func HoldsEntriesOf(n *Node, reg, origin string) bool {
	r, err := n.cluster.Registry(reg)
	if err != nil {
		return false
	}
	for _, v := range r.Digest() {
		if v.Origin.String() == origin {
			return true
		}
	}
	return false
}

// Demote stops n's copy of session id as a standby's refusal of its write
// (a later epoch) does.
func Demote(n *Node, id string) { n.replicas.demote(id) }
