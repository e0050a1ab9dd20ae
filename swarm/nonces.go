package swarm

import (
	"context"
	"encoding/binary"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/crdt"
	forwardv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/forward/v1"
)

const regNonces = "nonces"

// Nonces makes single-use tokens single-use across the cluster. One node
// decides for each token (its arbiter: the owner of the session the gated
// tool belongs to, which runs the call anyway; for a tool of no session,
// the first live member by name), under a lock, so two nodes presented the
// same token at once cannot both accept it. The arbiter records the token
// in the replicated "nonces" registry and waits until every live peer has
// it; every node copies a token it learns into its own partition (and so
// its bbolt file), so the token stays spent whichever nodes die. Entries
// carry their expiry and their writer removes them once expired.
type Nonces struct {
	s   *Swarm
	reg *cluster.Registry
	now func() time.Time

	mu sync.Mutex // serialises this node's decisions

	cmu    sync.Mutex
	copies map[string][]byte // other nodes' tokens to copy here
}

func newNonces(s *Swarm, reg *cluster.Registry) *Nonces {
	n := &Nonces{s: s, reg: reg, now: time.Now, copies: map[string][]byte{}}
	reg.OnChange(n.onChange)
	return n
}

// onChange queues a token another node recorded for copying into this
// node's partition, so it outlives that node. The swarm's publisher writes
// the copies (a registry callback must not write to the registry).
func (n *Nonces) onChange(ch crdt.Change) {
	if ch.Origin == n.s.cl.Origin() || len(ch.New) != 8 {
		return
	}
	n.cmu.Lock()
	n.copies[ch.Key] = append([]byte(nil), ch.New...)
	n.cmu.Unlock()
	n.s.wakePublisher()
}

// flushCopies writes the queued copies this node does not hold yet.
func (n *Nonces) flushCopies() {
	n.cmu.Lock()
	batch := n.copies
	n.copies = map[string][]byte{}
	n.cmu.Unlock()
	own := n.s.cl.Origin()
	for key, val := range batch {
		if _, ok := n.reg.Get(own, key); ok {
			continue
		}
		if err := n.reg.Put(key, val); err != nil {
			n.s.log.Warn("copying a spent request state", "err", err)
		}
	}
}

// arbiter names the node that decides for a state of tool.
func (n *Nonces) arbiter(tool string) string {
	if id, _, ok := strings.Cut(tool, "."); ok {
		if loc, found := n.s.locate(id); found && !n.reg.Hidden(loc.origin) {
			return loc.origin.Name
		}
	}
	var names []string
	for _, m := range n.s.cl.Members() {
		if m.State == cluster.StateAlive || m.State == cluster.StateDraining {
			names = append(names, m.Name)
		}
	}
	if len(names) == 0 {
		return n.s.self
	}
	return slices.Min(names)
}

// Spend records nonce of a state for tool (valid until expires) and
// reports whether it had been spent before, asking the arbiter. It fails
// closed: when the arbiter cannot be asked, the state counts as spent.
func (n *Nonces) Spend(ctx context.Context, tool, nonce string, expires time.Time) (already bool) {
	node := n.arbiter(tool)
	if node == n.s.self {
		return n.decide(nonce, expires)
	}
	ctx, cancel := n.s.bounded(ctx)
	defer cancel()
	err := n.s.call(ctx, node, func(fc forwardv1.ForwardServiceClient) error {
		resp, err := fc.SpendState(ctx, &forwardv1.SpendStateRequest{Nonce: nonce, ExpiresUnix: expires.Unix()})
		already = resp.GetAlreadySpent()
		return err
	}, func(lc legacyClient) error {
		var err error
		already, err = lc.spendState(ctx, nonce, expires)
		return err
	})
	if err != nil {
		n.s.log.Warn("asking the arbiter of a request state; refusing it", "arbiter", node, "err", err)
		return true
	}
	return already
}

// decide is the arbiter's decision: spent if any node recorded it;
// otherwise recorded here and applied by every live peer before it counts
// as fresh.
func (n *Nonces) decide(nonce string, expires time.Time) (already bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
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
	ctx, cancel := clockwork.WithTimeout(context.Background(), n.s.cl.Clock(), n.s.ackTimeout)
	defer cancel()
	if err := n.reg.AwaitPeers(ctx); err != nil {
		n.s.log.Warn("spent request state not applied by every live peer in time", "err", err)
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
