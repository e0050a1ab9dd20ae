package swarm

import (
	"encoding/binary"
	"time"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/crdt"
)

const regNonces = "nonces"

// Nonces makes single-use tokens single-use across the cluster: the node
// that accepts one records it in the replicated "nonces" registry, and
// every node refuses one any node has recorded. Entries carry their expiry
// and their writer removes them once expired.
type Nonces struct {
	s   *Swarm
	reg *cluster.Registry
	now func() time.Time
}

// Spend records nonce (valid until expires) and reports whether any node
// had recorded it before. Two nodes accepting the same nonce within one
// replication delay (a few milliseconds) both succeed; everything later is
// refused.
func (n *Nonces) Spend(nonce string, expires time.Time) (already bool) {
	if len(n.reg.Lookup(nonce)) > 0 {
		return true
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(expires.Unix()))
	if err := n.reg.Put(nonce, b[:]); err != nil {
		// Fail closed: a nonce that cannot be recorded is not accepted.
		n.s.log.Warn("recording a spent request state", "err", err)
		return true
	}
	n.sweep()
	return false
}

// sweep removes this node's expired nonces.
func (n *Nonces) sweep() {
	own, now := n.s.cl.Origin(), n.now()
	var expired []string
	n.reg.Range(func(e crdt.Entry) bool {
		if e.Origin == own && len(e.Value) == 8 && now.Unix() > int64(binary.BigEndian.Uint64(e.Value)) {
			expired = append(expired, e.Key)
		}
		return true
	})
	for _, k := range expired {
		if err := n.reg.Remove(k); err != nil {
			n.s.log.Warn("removing an expired request state", "err", err)
		}
	}
}
