package swarm

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/session"
)

// A session's tool set is what a client may call next, through whichever
// node it reaches: a call that changed it (typing enabled a button, a
// dialog opened) and a swarm_start are answered only once every live peer
// has applied the new set, so the next call finds the tool everywhere, as
// it would on a single node. Resource revisions keep the publisher's
// rounds: reads go to the owner, so no node answers them from a replica.

// toolsGeneration counts the tool-set changes of local session id this node
// has heard of (session.ToolsChanged, announced before the call answers).
func (s *Swarm) toolsGeneration(id string) uint64 {
	if g, ok := s.toolGen.Load(id); ok {
		return g.(*atomic.Uint64).Load()
	}
	return 0
}

// callLocal runs op, a call on local session id, and when op changed the
// session's tool set waits until every live peer has it (shareTools).
func (s *Swarm) callLocal(id string, op func() (session.Result, error)) (session.Result, error) {
	gen := s.toolsGeneration(id)
	res, err := op()
	if err == nil && s.toolsGeneration(id) != gen {
		s.shareTools(id)
	}
	return res, err
}

// shareTools writes local session id's tool set now, not in the
// publisher's next round, and waits until every live peer has applied it
// (at most AckTimeout; a peer that misses it loses its lease, as for
// connection state, and catches up by anti-entropy).
func (s *Swarm) shareTools(id string) {
	if _, moving := s.handoffs.get(id); moving {
		return // HandOff writes this session's records itself
	}
	info, running := s.mgr.Get(id)
	if !running {
		return
	}
	s.mu.Lock()
	if d, ok := s.pending[id]; ok && d.tools { // written here: the round need not
		d.tools = false
		if d.record {
			s.pending[id] = d
		} else {
			delete(s.pending, id)
		}
	}
	s.mu.Unlock()
	if err := s.publishTools(id, info.Principal); err != nil {
		s.log.Warn("publishing tools", "session", id, "err", err)
		return
	}
	s.awaitPeers(s.tools, "tools", id)
}

// awaitPeers waits, at most AckTimeout on the cluster's clock, until every
// live peer has applied this node's writes to reg, and records the wait.
func (s *Swarm) awaitPeers(reg *cluster.Registry, what, id string) {
	clock := s.cl.Clock()
	ctx, cancel := clockwork.WithTimeout(context.Background(), clock, s.ackTimeout)
	defer cancel()
	start := clock.Now()
	err := reg.AwaitPeers(ctx)
	s.met.sessionAck(what, time.Duration(clock.Since(start)), err == nil)
	if err != nil {
		s.log.Warn("session change not applied by every live peer in time", "what", what, "session", id, "err", err)
	}
}
