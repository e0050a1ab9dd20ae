package swarm

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/crdt"
	"github.com/mcpswarm/mcpswarm/internal/coalesce"
	"github.com/mcpswarm/mcpswarm/mcp"
)

const regConns = "conns"

// connRecord is what one node knows of a client connection (registry
// "conns", key: the Mcp-Session-Id). Every node that serves the connection
// writes its own record. Each part of what is known carries the time it was
// last learnt, so readers merge part by part (the newest of each wins): a
// node that saw only a subscription never erases the capabilities the home
// node learnt at initialize. A revocation by any node ends the connection
// everywhere.
type connRecord struct {
	Info mcp.ConnInfo `json:"info,omitzero"`
	// HelloAt stamps what initialize taught: protocol version, client info
	// and capabilities (and the home node and principal).
	HelloAt time.Time `json:"hello_at,omitzero"`
	// LevelAt stamps the log level, SubsAt the subscriptions.
	LevelAt time.Time `json:"level_at,omitzero"`
	SubsAt  time.Time `json:"subs_at,omitzero"`
	// StreamNode is set by the node holding the connection's GET stream.
	StreamNode string `json:"stream_node,omitempty"`
	// Revoked marks a connection ended on some node. A revoked record
	// keeps nothing else (revoked): refusal needs only the id (the key)
	// and the age (Touched), and it is kept for the id's maximum age.
	Revoked bool `json:"revoked,omitempty"`
	// Touched is when this node last changed the record; its writer
	// forgets it once older than the session ids' maximum age.
	Touched time.Time `json:"touched,omitzero"`
}

// sameHello reports whether two infos agree on what initialize teaches.
func sameHello(a, b mcp.ConnInfo) bool {
	ja, _ := json.Marshal([]any{a.Node, a.Principal, a.ProtocolVersion, a.ClientInfo, a.Capabilities})
	jb, _ := json.Marshal([]any{b.Node, b.Principal, b.ProtocolVersion, b.ClientInfo, b.Capabilities})
	return string(ja) == string(jb)
}

// stamp records into r the parts of next that differ from what the cluster
// knew (known), with time now.
func stamp(r *connRecord, known, next mcp.ConnInfo, now time.Time) {
	r.Info.ID = next.ID
	if !sameHello(known, next) {
		r.Info.Node, r.Info.Principal, r.Info.ProtocolVersion = next.Node, next.Principal, next.ProtocolVersion
		r.Info.ClientInfo, r.Info.Capabilities = next.ClientInfo, next.Capabilities
		r.HelloAt = now
	}
	if known.LogLevel != next.LogLevel {
		r.Info.LogLevel, r.LevelAt = next.LogLevel, now
	}
	if !slices.Equal(known.Subscriptions, next.Subscriptions) {
		r.Info.Subscriptions, r.SubsAt = slices.Clone(next.Subscriptions), now
	}
}

// merge combines every node's record of one connection, part by part.
func merge(records []connRecord) (mcp.ConnInfo, bool) {
	var m merger
	for i := range records {
		m.add(&records[i])
	}
	return m.result()
}

// merger folds the records of one connection one at a time, as merge
// does, so a reader under Conns' lock needs no copy of them.
type merger struct {
	out                mcp.ConnInfo
	hello, level, subs time.Time
	found, revoked     bool
}

func (m *merger) add(r *connRecord) {
	if m.revoked || r.Revoked {
		m.revoked = true
		return
	}
	if r.Info.ID == "" {
		return
	}
	m.found = true
	m.out.ID = r.Info.ID
	if r.HelloAt.After(m.hello) {
		m.hello = r.HelloAt
		m.out.Node, m.out.Principal, m.out.ProtocolVersion = r.Info.Node, r.Info.Principal, r.Info.ProtocolVersion
		m.out.ClientInfo, m.out.Capabilities = r.Info.ClientInfo, r.Info.Capabilities
	}
	if r.LevelAt.After(m.level) {
		m.level, m.out.LogLevel = r.LevelAt, r.Info.LogLevel
	}
	if r.SubsAt.After(m.subs) {
		m.subs, m.out.Subscriptions = r.SubsAt, r.Info.Subscriptions
	}
}

// result is the merged connection, unless a record revoked it.
func (m *merger) result() (mcp.ConnInfo, bool) {
	if m.revoked {
		return mcp.ConnInfo{}, false
	}
	return m.out, m.found
}

// Conns is the cluster-wide connection registry the MCP front uses, so a
// request landing on any node is served with what the connection's home
// node learnt, notifications leave from the node holding its stream, and a
// DELETE on any node ends it everywhere.
type Conns struct {
	s   *Swarm
	reg *cluster.Registry

	mu   sync.Mutex
	mine map[string]connRecord // this node's records, authoritative
	// ended holds this node's revocations (id -> when, in unix
	// nanoseconds) instead of mine: a revoked record carries nothing else,
	// and one is kept per ended connection for the id's maximum age.
	ended map[string]int64
	// elsewhere holds the revocations other nodes hold (id -> when): a
	// revocation lives in its revoker's partition only, and is copied into
	// this node's own when that partition goes away while the id is still
	// valid (the revoker died or restarted), so it outlives the revoker
	// without every node holding every revocation three times.
	elsewhere map[string]int64
	// others holds the other nodes' visible records, decoded.
	others map[string]map[crdt.Origin]connRecord
	dirty  map[string]bool
	// kick wakes the swarm's publisher, which writes sessions and
	// connection records in the same rounds.
	kick coalesce.Signal
}

func newConns(s *Swarm, reg *cluster.Registry) *Conns {
	c := &Conns{s: s, reg: reg, mine: map[string]connRecord{}, ended: map[string]int64{},
		elsewhere: map[string]int64{}, others: map[string]map[crdt.Origin]connRecord{}, dirty: map[string]bool{}, kick: s.kick}
	reg.OnChange(c.onChange)
	return c
}

// onChange keeps other nodes' records decoded: every request checks its
// id against them (revocation), so they are decoded once, on arrival.
func (c *Conns) onChange(ch crdt.Change) {
	if ch.Origin == c.s.cl.Origin() {
		return // this node's records live in c.mine
	}
	var r connRecord
	keep := ch.New != nil && json.Unmarshal(ch.New, &r) == nil
	if !keep {
		c.lostRevocation(ch)
	}
	if f := c.s.front(); keep && r.Revoked && f != nil {
		// Ended on another node: drop what the front holds for it here
		// (after the lock: the front calls back into Conns).
		defer f.Forget(ch.Key)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !keep || r.Revoked {
		// A revocation is held in this node's own record (below), so
		// the other node's copy need not be decoded and kept too.
		delete(c.others[ch.Key], ch.Origin)
		if len(c.others[ch.Key]) == 0 {
			delete(c.others, ch.Key)
		}
	}
	if !keep {
		return
	}
	if r.Revoked {
		c.elsewhere[ch.Key] = r.Touched.UnixNano()
		if _, live := c.mine[ch.Key]; live {
			// This node's record of the ended connection goes: the
			// revocation is the whole truth now (flush removes it).
			delete(c.mine, ch.Key)
			c.dirty[ch.Key] = true
			c.kick.Kick()
		}
		return
	}
	if c.others[ch.Key] == nil {
		c.others[ch.Key] = map[crdt.Origin]connRecord{}
	}
	c.others[ch.Key][ch.Origin] = r
}

// lostRevocation keeps a revocation another node held when it leaves that
// node's partition (hidden, dropped, or replaced by a restart's new epoch)
// while the id is still valid: this node then holds it in its own
// partition, with the original time, so it expires when the original
// would have. One removed at its expiry (by its holder's sweep) is not
// copied: copying needs a margin before the expiry, so two nodes never
// copy each other's revocations back and forth.
func (c *Conns) lostRevocation(ch crdt.Change) {
	var old connRecord
	if ch.Old == nil || json.Unmarshal(ch.Old, &old) != nil || !old.Revoked {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(old.Touched) > c.s.connMaxAge-revocationCopyMargin {
		delete(c.elsewhere, ch.Key)
		return
	}
	if _, have := c.ended[ch.Key]; have {
		return
	}
	c.setMineLocked(ch.Key, old)
	c.dirty[ch.Key] = true
	c.kick.Kick()
}

// revocationCopyMargin is how long before its expiry a revocation that
// leaves another node's partition is no longer copied (see lostRevocation).
const revocationCopyMargin = time.Minute

// revoked is the record of an ended connection: the revocation and its
// time, and none of the client's facts (its clientInfo and capabilities
// were up to 16 KiB, kept on every node for the id's maximum age).
func revoked(now time.Time) connRecord { return connRecord{Revoked: true, Touched: now} }

// mineLocked returns this node's view of id: its own record, or the
// revocation another node holds (this node's live record of it went when
// that arrived).
func (c *Conns) mineLocked(id string) (connRecord, bool) {
	r, ok := c.ownLocked(id)
	if at, gone := c.elsewhere[id]; gone && !r.Revoked {
		return revoked(time.Unix(0, at)), true
	}
	return r, ok
}

// ownLocked returns the record this node publishes for id in its own
// partition: a live record or one of its revocations.
func (c *Conns) ownLocked(id string) (connRecord, bool) {
	if at, ok := c.ended[id]; ok {
		return revoked(time.Unix(0, at)), true
	}
	r, ok := c.mine[id]
	return r, ok
}

// setMineLocked stores this node's record of id: a revocation in ended.
func (c *Conns) setMineLocked(id string, r connRecord) {
	if r.Revoked {
		delete(c.mine, id)
		c.ended[id] = r.Touched.UnixNano()
		return
	}
	c.mine[id] = r
}

// Get implements mcp.ConnRegistry: the newest record, unless revoked. It
// merges under the lock, in records' order, without copying the records:
// the front asks once per visited connection per resource event.
func (c *Conns) Get(id string) (mcp.ConnInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var m merger
	if r, ok := c.mineLocked(id); ok {
		m.add(&r)
	}
	for _, r := range c.others[id] {
		m.add(&r)
	}
	return m.result()
}

// Put implements mcp.ConnRegistry: what changed against the merged view is
// stamped into this node's record, written, and applied by every live peer
// before Put returns (read-your-writes from any node), within the swarm's
// AckTimeout.
func (c *Conns) Put(info mcp.ConnInfo) {
	known, _ := c.Get(info.ID)
	c.update(info.ID, func(r *connRecord) { stamp(r, known, info, time.Now()) })
	c.commit(info.ID)
}

// Delete implements mcp.ConnRegistry: a revocation every node honours,
// applied by every live peer before Delete returns (as Put).
func (c *Conns) Delete(id string) {
	c.update(id, func(r *connRecord) { *r = revoked(time.Time{}) })
	c.commit(id)
}

// commit writes this node's record of id now and waits, within the
// AckTimeout, until every live peer has applied it. A peer that misses the
// bound is logged and counted, and refuses the connection until it has
// caught up (its lease lapsed before commit returns; see CanServe).
func (c *Conns) commit(id string) {
	if id == "" {
		return
	}
	c.mu.Lock()
	r, own := c.ownLocked(id)
	b, err := json.Marshal(r)
	delete(c.dirty, id)
	c.mu.Unlock()
	if !own {
		return // ended on another node, which holds the revocation
	}
	if err == nil {
		err = c.reg.Put(id, b)
	}
	if err != nil {
		c.s.log.Warn("publishing connection record", "conn", id, "err", err)
		return
	}
	clock := c.s.cl.Clock()
	ctx, cancel := clockwork.WithTimeout(context.Background(), clock, c.s.ackTimeout)
	defer cancel()
	start := clock.Now()
	// A peer that misses the bound has lost its lease when AwaitPeers
	// returns: it refuses the connection (CanServe) until it caught up.
	err = c.reg.AwaitPeers(ctx)
	c.s.met.connAck(clock.Since(start), err == nil)
	if err != nil {
		c.s.log.Warn("connection state not applied by every live peer in time", "conn", id, "err", err)
	}
}

// List returns every live connection the cluster knows (revoked ones
// left out), merged across nodes, sorted by id.
func (c *Conns) List() []mcp.ConnInfo {
	ids := map[string]bool{}
	c.mu.Lock()
	for id := range c.mine {
		ids[id] = true
	}
	for id := range c.others {
		ids[id] = true
	}
	c.mu.Unlock()
	out := make([]mcp.ConnInfo, 0, len(ids))
	for id := range ids {
		if info, ok := c.Get(id); ok {
			out = append(out, info)
		}
	}
	slices.SortFunc(out, func(a, b mcp.ConnInfo) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Revoked implements mcp.Connections: whether any node ended connection id.
// Every request asks, so it looks the id up without copying a record.
func (c *Conns) Revoked(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.ended[id]; ok {
		return true
	}
	if _, ok := c.elsewhere[id]; ok {
		return true
	}
	if c.mine[id].Revoked {
		return true
	}
	for _, r := range c.others[id] {
		if r.Revoked {
			return true
		}
	}
	return false
}

// StreamChanged implements mcp.Connections: it records that this node holds (or no longer holds) the
// connection's GET stream.
func (c *Conns) StreamChanged(id string, held bool) {
	c.update(id, func(r *connRecord) {
		r.Info.ID = id
		r.StreamNode = ""
		if held {
			r.StreamNode = c.s.self
		}
	})
}

// NotifyHere implements mcp.Connections: it decides which node sends connection id's notifications: the
// one holding its GET stream; with no stream anywhere, its home node.
func (c *Conns) NotifyHere(id string) bool {
	if f := c.s.front(); f != nil && f.HoldsStream(id) {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	home := ""
	// Records in records' order (this node's first), read in place.
	visit := func(r *connRecord) bool {
		if r.Revoked || (r.StreamNode != "" && r.StreamNode != c.s.self) {
			return false
		}
		if r.Info.Node != "" {
			home = r.Info.Node
		}
		return true
	}
	if r, ok := c.mineLocked(id); ok && !visit(&r) {
		return false
	}
	for _, r := range c.others[id] {
		if !visit(&r) {
			return false
		}
	}
	return home == c.s.self
}

func (c *Conns) update(id string, fn func(*connRecord)) {
	if id == "" {
		return
	}
	c.mu.Lock()
	r, _ := c.mineLocked(id)
	if r.Revoked {
		// An ended connection learns nothing more: a late request's facts
		// must not grow its revocation back.
		c.mu.Unlock()
		return
	}
	fn(&r)
	if r.Revoked {
		r = revoked(time.Time{})
	}
	r.Touched = time.Now()
	c.setMineLocked(id, r)
	c.dirty[id] = true
	c.mu.Unlock()
	c.kick.Kick()
}

// flush writes this node's changed records to the registry.
func (c *Conns) flush() {
	c.mu.Lock()
	batch := make(map[string][]byte, len(c.dirty))
	var gone []string
	for id := range c.dirty {
		r, ok := c.ownLocked(id)
		if !ok {
			gone = append(gone, id)
			continue
		}
		b, err := json.Marshal(r)
		if err == nil {
			batch[id] = b
		}
	}
	c.dirty = map[string]bool{}
	c.mu.Unlock()
	for _, id := range gone {
		if err := c.reg.Remove(id); err != nil {
			c.s.log.Warn("removing a connection record", "conn", id, "err", err)
		}
	}
	for id, b := range batch {
		if err := c.reg.Put(id, b); err != nil {
			c.s.log.Warn("publishing connection record", "conn", id, "err", err)
		}
	}
}

// sweep forgets this node's records (revocations included) untouched for
// longer than maxAge: the session ids they describe are expired by then
// (mcp.Config.SessionMaxAge), so nobody can present them any more.
func (c *Conns) sweep(now time.Time, maxAge time.Duration) {
	c.sweepWith(now, maxAge, c.reg.Remove)
}

func (c *Conns) sweepWith(now time.Time, maxAge time.Duration, remove func(id string) error) {
	c.mu.Lock()
	var old []string
	for id, r := range c.mine {
		if now.Sub(r.Touched) > maxAge {
			old = append(old, id)
			delete(c.mine, id)
			delete(c.dirty, id)
		}
	}
	for id, at := range c.ended {
		if now.Sub(time.Unix(0, at)) > maxAge {
			old = append(old, id)
			delete(c.ended, id)
			delete(c.dirty, id)
		}
	}
	for id, at := range c.elsewhere {
		if now.Sub(time.Unix(0, at)) > maxAge {
			delete(c.elsewhere, id)
		}
	}
	c.mu.Unlock()
	for _, id := range old {
		if err := remove(id); err != nil {
			c.s.log.Warn("forgetting an expired connection record", "conn", id, "err", err)
		}
	}
}

// restore loads this node's records restored from disk into memory.
func (c *Conns) restore() {
	self := c.s.cl.Origin()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reg.Range(func(e crdt.Entry) bool {
		if e.Origin != self {
			return true
		}
		var r connRecord
		if json.Unmarshal(e.Value, &r) == nil {
			r.StreamNode = "" // streams do not survive a restart
			c.setMineLocked(e.Key, r)
		}
		return true
	})
}

// SpendState implements mcp.Connections: the cluster's arbiter of the
// state's tool decides (see Nonces.Spend).
func (c *Conns) SpendState(ctx context.Context, tool, nonce string, expires time.Time) (already bool) {
	return c.s.nonces.Spend(ctx, tool, nonce, expires)
}

var _ mcp.Connections = (*Conns)(nil)
