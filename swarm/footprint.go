package swarm

import (
	"time"

	"github.com/mcpswarm/mcpswarm/crdt"
)

// Footprint is what this node holds of the replicated registries: entries
// (every origin's) and the bytes of their values, and the connection
// records kept decoded. Tests use it to show that ended connections and
// stopped sessions leave only small, bounded records behind.
type Footprint struct {
	Sessions, Tools, Conns                int // registry entries
	SessionBytes, ToolBytes, ConnBytes    int // their values' bytes
	ConnKeyBytes                          int // the conns entries' keys' bytes
	ConnsMine, ConnsDecoded, ConnsRevoked int // this node's records, others' decoded, revoked (own)
	// ConnsIndexed counts the ids indexed by revocation digest (live ones,
	// and those whose records went while their revocation is awaited).
	ConnsIndexed int
	// RevokedElsewhere counts the revocations other nodes hold, known here.
	RevokedElsewhere int
	// RevokedBefore is the cluster's revocation floor as this node knows
	// it (zero: none).
	RevokedBefore time.Time
	// Nonces counts the spent request states held here (Nonces.Len).
	Nonces int
}

// Footprint measures the registries now.
func (s *Swarm) Footprint() Footprint {
	var f Footprint
	count := func(reg interface{ Range(func(crdt.Entry) bool) }, n, b *int) {
		reg.Range(func(e crdt.Entry) bool {
			*n++
			*b += len(e.Value)
			return true
		})
	}
	count(s.sessions, &f.Sessions, &f.SessionBytes)
	count(s.tools, &f.Tools, &f.ToolBytes)
	count(s.conns.reg, &f.Conns, &f.ConnBytes)
	f.Nonces = s.nonces.Len()
	s.conns.reg.Range(func(e crdt.Entry) bool {
		f.ConnKeyBytes += len(e.Key)
		return true
	})
	s.conns.mu.Lock()
	f.ConnsRevoked = s.conns.ended.len() + s.conns.endedSerials
	f.ConnsMine = len(s.conns.mine) + f.ConnsRevoked
	f.RevokedElsewhere = s.conns.elsewhere.len()
	for _, bits := range s.conns.elsewhereBlocks {
		f.RevokedElsewhere += bits.count()
	}
	f.ConnsIndexed = len(s.conns.ids) + len(s.conns.digests) + len(s.conns.gone) + len(s.conns.byPrincipal) + len(s.conns.principals)
	for _, byOrigin := range s.conns.others {
		f.ConnsDecoded += len(byOrigin)
	}
	s.conns.mu.Unlock()
	f.RevokedBefore = s.conns.RevokedBefore()
	return f
}
