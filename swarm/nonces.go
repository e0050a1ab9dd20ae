package swarm

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/crdt"
	"github.com/mcpswarm/mcpswarm/internal/coalesce"
	forwardv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/forward/v1"
)

const regNonces = "nonces"

// Nonces makes single-use tokens single-use across the cluster. A spent
// token is kept by its holders only: the first spentCopies live members in
// the token's rendezvous order (spentHolders), each in memory and in its
// bbolt file. Spend asks them in that order to hold it, and the token is
// fresh only when none held it already. A holder's check and record are
// one step, and every Spend asks the first holder first, so of two nodes
// presented the same token at once exactly one hears it is fresh. When a
// holder dies (or restarts, or a new node ranks above it) the other holder
// is still among the first two, so the token stays spent; the nodes that
// hold it then copy it to the new first two (rebalance), so it has two
// holders again; a copy carries the Spend call's id, so a copy that races
// the call's own second ask does not refuse the call. An approval costs
// two nodes a record, whatever the cluster's size. A node that counts a
// holder dead asks the next in the order only while it hears from a
// majority (cluster.InMajority): cut off, it would name holders that never
// held the state, so it refuses (fail closed). Members forgotten after
// the dead grace still count against that majority (cluster.Lost), so a
// node cut off for longer refuses too.
//
// While a live peer is of a previous version (it lacks
// cluster.CapSpentHolders), the previous rule applies: one node decides
// (the arbiter: the owner of the gated tool's session, or the first live
// member by name), records the token in the replicated "nonces" registry,
// waits until every live peer has it, and every node copies it into its
// own partition so it outlives the arbiter. Tokens recorded so stay
// spent under the new rule until they expire.
type Nonces struct {
	s    *Swarm
	reg  *cluster.Registry
	now  func() time.Time
	held *spentStore

	mu sync.Mutex // serialises this node's decisions as the arbiter (previous rule)

	cmu    sync.Mutex
	copies map[string][]byte // other nodes' registry tokens to copy here (previous rule)

	// rebalancing: the live members (name → epoch) when the states held
	// here were last copied to their holders; nil before the first time.
	// Only the rebalance loop touches it.
	known map[string]uint64
	rkick coalesce.Signal
}

func newNonces(s *Swarm, reg *cluster.Registry, held *spentStore) *Nonces {
	n := &Nonces{s: s, reg: reg, now: time.Now, held: held, copies: map[string][]byte{}, rkick: coalesce.NewSignal()}
	reg.OnChange(n.onChange)
	return n
}

// onChange queues a token another node recorded by the previous rule for
// copying into this node's partition, so it outlives that node. The
// swarm's publisher writes the copies (a registry callback must not write
// to the registry).
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

// live returns the live members (alive or draining) by name, with their
// epochs; this node always among them.
func (n *Nonces) live() map[string]uint64 {
	out := map[string]uint64{n.s.self: n.s.cl.Origin().Epoch}
	for _, m := range n.s.cl.Members() {
		if m.State == cluster.StateAlive || m.State == cluster.StateDraining {
			out[m.Name] = m.Epoch
		}
	}
	return out
}

// members returns the live members' names (alive or draining) and the
// listed ones': the live, and those this node counts dead or unreachable
// (suspect) but has not forgotten. A member that left gracefully is
// neither: it departed, no partition hides it.
func (n *Nonces) members() (live, listed []string) {
	live, listed = []string{n.s.self}, []string{n.s.self}
	for _, m := range n.s.cl.Members() {
		if m.Self {
			continue
		}
		switch m.State {
		case cluster.StateAlive, cluster.StateDraining:
			live = append(live, m.Name)
			listed = append(listed, m.Name)
		case cluster.StateSuspect, cluster.StateDead:
			listed = append(listed, m.Name)
		}
	}
	return live, listed
}

// arbiter names the node that decides for a state of tool by the
// previous rule.
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
// reports whether it had been spent before. It fails closed: when a node
// that must be asked cannot be, the state counts as spent.
func (n *Nonces) Spend(ctx context.Context, tool, nonce string, expires time.Time) (already bool) {
	if n.s.peerLacks(cluster.CapSpentHolders) {
		return n.spendAtArbiter(ctx, tool, nonce, expires)
	}
	if len(n.reg.Lookup(nonce)) > 0 {
		return true // spent by the previous rule
	}
	live, listed := n.members()
	holders := spentHolders(nonce, live, spentCopies)
	if !slices.Equal(holders, spentHolders(nonce, listed, spentCopies)) || len(n.s.cl.Lost()) > 0 {
		// This node counts a holder dead (or unreachable, or forgotten
		// after the grace but still lost) and names another, which may
		// never have held the state: right if the holder is gone, wrong
		// if this node is the one cut off.
		if err := n.s.cl.InMajority(); err != nil {
			n.s.log.Warn("refusing a request state: a holder is unreachable and this node does not hear from a majority of the cluster", "err", err)
			return true
		}
	}
	var id [16]byte
	_, _ = rand.Read(id[:])
	for _, node := range holders {
		if n.holdAt(ctx, node, nonce, string(id[:]), expires) {
			return true
		}
	}
	return false
}

// holdAt asks node to hold nonce for the Spend call by and reports whether
// another call spent it already, or node could not be asked (fail closed).
func (n *Nonces) holdAt(ctx context.Context, node, nonce, by string, expires time.Time) (already bool) {
	if node == n.s.self {
		return n.hold(nonce, by, expires)
	}
	ctx, cancel := n.s.bounded(ctx)
	defer cancel()
	err := n.s.call(ctx, node, func(fc forwardv1.ForwardServiceClient) error {
		resp, err := fc.SpendState(ctx, &forwardv1.SpendStateRequest{Nonce: nonce, ExpiresUnix: expires.Unix(), Hold: true, Spend: []byte(by)})
		already = resp.GetAlreadySpent()
		return err
	}, nil)
	if err != nil {
		n.s.log.Warn("asking a holder of a request state; refusing it", "holder", node, "err", err)
		return true
	}
	return already
}

// hold keeps nonce, spent by call by, among the states this node holds
// and reports whether another call spent it already. A state it cannot
// store counts as spent: the asking node refuses it rather than accept it
// unrecorded.
func (n *Nonces) hold(nonce, by string, expires time.Time) (already bool) {
	already, err := n.held.hold(nonce, by, expires, n.now())
	if err != nil {
		n.s.log.Warn("holding a spent request state; refusing it", "err", err)
		return true
	}
	return already
}

// spendAtArbiter is Spend by the previous rule: the arbiter decides.
func (n *Nonces) spendAtArbiter(ctx context.Context, tool, nonce string, expires time.Time) (already bool) {
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

// decide is the arbiter's decision by the previous rule: spent if any
// node recorded it (or this node holds it); otherwise recorded here and
// applied by every live peer before it counts as fresh.
func (n *Nonces) decide(nonce string, expires time.Time) (already bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.reg.Lookup(nonce)) > 0 || n.held.has(nonce) {
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

// sweep removes this node's expired nonces from the registry.
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

// Len counts the spent request states this node holds: as one of their
// holders, and every node's recorded by the previous rule.
func (n *Nonces) Len() int { return n.held.len() + n.reg.Len() }

// membersChanged has the rebalance loop run soon.
func (n *Nonces) membersChanged() { n.rkick.Kick() }

// rebalanceDelay is how long the rebalance loop gathers membership changes
// before it copies: a node's death is seen as suspect, then dead, in a
// few hundred milliseconds.
const rebalanceDelay = 100 * time.Millisecond

// rebalanceLoop copies the states held here to the holders that lack them
// after each membership change, until ctx ends; done closes then.
func (n *Nonces) rebalanceLoop(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	n.rkick.Kick() // at start: this node's holders may have changed while it was down
	coalesce.Run(ctx.Done(), n.rkick, rebalanceDelay, func() {
		if ctx.Err() == nil {
			n.rebalance(ctx)
		}
	})
}

// rebalance sends each held state to the holders it gained since the last
// rebalance (spentMoves). A holder a copy could not reach is sent its
// states again a little later (the other holder keeps them meanwhile).
func (n *Nonces) rebalance(ctx context.Context) {
	if n.s.peerLacks(cluster.CapSpentHolders) {
		return // the previous rule: every node copies
	}
	now := n.live()
	moves := spentMoves(n.held.snapshot(n.now()), n.s.self, n.known, now)
	n.known = now
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		missed []string
	)
	for node, nonces := range moves {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, n.s.timeout)
			defer cancel()
			for nonce, e := range nonces {
				err := n.s.call(ctx, node, func(fc forwardv1.ForwardServiceClient) error {
					_, err := fc.SpendState(ctx, &forwardv1.SpendStateRequest{Nonce: nonce, ExpiresUnix: e.exp, Hold: true, Spend: []byte(e.by)})
					return err
				}, nil)
				if err != nil {
					n.s.log.Warn("copying spent request states to a new holder", "holder", node, "states", len(nonces), "err", err)
					mu.Lock()
					missed = append(missed, node)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if len(missed) == 0 {
		return
	}
	for _, node := range missed {
		n.known[node] = 0 // no epoch is 0: it counts as new next time
	}
	select {
	case <-ctx.Done():
	case <-time.After(rebalanceRetry):
		n.rkick.Kick()
	}
}

// rebalanceRetry is how long after a failed copy the rebalance loop tries
// again.
const rebalanceRetry = time.Second
