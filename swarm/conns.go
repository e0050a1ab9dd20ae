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
	mine map[string]connRecord // this node's live records, authoritative
	// ended holds this node's revocations (digest -> when, in unix
	// nanoseconds): a revocation is kept per ended connection for the id's
	// maximum age, on every node, so it carries nothing but its key's
	// digest and time (see revKey), packed (see revSet).
	ended revSet[revTime]
	// elsewhere holds the revocations other nodes hold, by digest: a
	// revocation lives in its revoker's partition only, and is copied into
	// this node's own when that partition goes away while the id is still
	// valid (the revoker died or restarted), so it outlives the revoker
	// without every node holding every revocation three times.
	// Their times stay in the registry: an entry goes when its holder
	// removes it (expiry) or its partition goes (lostRevocation).
	elsewhere revSet[struct{}]
	// endedBlocks and elsewhereBlocks are the same for serial ids, whose
	// revocations are kept by block (see revblocks.go); endedSerials
	// counts the serials in endedBlocks.
	endedBlocks     map[blockID]*revBlock
	endedSerials    int
	elsewhereBlocks map[blockID]*revBits
	// legacy holds this node's revocations also written in the previous
	// form (the id's own key, a revoked connRecord), for peers that do not
	// read revocation keys (cluster.CapRevocationKeys): id -> when.
	legacy map[string]int64
	// others holds the other nodes' visible live records, decoded.
	others map[string]map[crdt.Origin]connRecord
	// ids and digests index every id of mine and others by its
	// revocation's digest and back, so a revocation known only by digest
	// finds the records it ends, and a request for a live id is checked
	// without hashing it.
	ids     map[revKey]string
	digests map[string]revKey
	// byPrincipal indexes the same ids by every principal a record of
	// theirs names (OfPrincipal reads a principal's, not every record),
	// and principals is its reverse, to drop an id once unindexed.
	byPrincipal map[string]map[string]struct{}
	principals  map[string][]string
	// floor is this node's revocation floor (unix nanoseconds, 0: none):
	// every id issued at or before it counts as revoked. It replaces this
	// node's oldest revocations once it holds more than maxRevocations
	// (see trimLocked); floors holds the other nodes' floors.
	floor          int64
	floors         map[crdt.Origin]int64
	maxRevocations int
	// gone holds the ids whose last record another node removed, by
	// digest, for a minute or two: a node drops its live record when it
	// learns of a revocation, and that removal can reach this node before
	// the revocation itself does; the revocation then still finds the id
	// to make the front forget it (mcp-go keeps per-id state for 30 min).
	gone map[revKey]goneID
	// dirty holds the registry keys of this node's partition to write:
	// ids of live records and revocation keys.
	dirty map[string]bool
	// kick wakes the swarm's publisher, which writes sessions and
	// connection records in the same rounds.
	kick coalesce.Signal
}

func newConns(s *Swarm, reg *cluster.Registry) *Conns {
	c := newConnsState(s)
	c.reg = reg
	reg.OnChange(c.onChange)
	return c
}

// newConnsState returns a Conns with its maps made and no registry.
func newConnsState(s *Swarm) *Conns {
	c := &Conns{s: s, mine: map[string]connRecord{},
		legacy: map[string]int64{},
		others: map[string]map[crdt.Origin]connRecord{}, ids: map[revKey]string{},
		digests: map[string]revKey{}, gone: map[revKey]goneID{}, dirty: map[string]bool{},
		byPrincipal: map[string]map[string]struct{}{}, principals: map[string][]string{},
		floors: map[crdt.Origin]int64{}, maxRevocations: DefaultMaxRevocations,
		endedBlocks: map[blockID]*revBlock{}, elsewhereBlocks: map[blockID]*revBits{}}
	if s != nil && s.maxRevocations > 0 {
		c.maxRevocations = s.maxRevocations
	}
	if s != nil {
		c.kick = s.kick
	}
	return c
}

// onChange keeps other nodes' records decoded and their revocations
// known: every request checks its id against them, so they are read once,
// on arrival.
func (c *Conns) onChange(ch crdt.Change) {
	if ch.Origin == c.s.cl.Origin() {
		return // this node's records live in c.mine and c.ended
	}
	if ch.Key == floorKey {
		c.floorChanged(ch)
		return
	}
	if b, ok := parseBlockKey(ch.Key); ok {
		c.blockChanged(b, ch)
		return
	}
	if k, ok := parseRevKey(ch.Key); ok {
		if _, ok := decodeRevocation(ch.New); ok {
			c.revokedElsewhere(k)
		} else if at, ok := decodeRevocation(ch.Old); ok {
			c.lostRevocation(k, at)
		}
		return
	}
	var r connRecord
	keep := ch.New != nil && json.Unmarshal(ch.New, &r) == nil
	if !keep {
		var old connRecord
		if ch.Old != nil && json.Unmarshal(ch.Old, &old) == nil && old.Revoked {
			// A previous version's revocation left its partition.
			if k, serial := c.keyOf(ch.Key); serial {
				var lost revBlock
				b, i := splitSerial(k)
				lost.at = old.Touched.UnixNano()
				lost.bits.set(i)
				c.lostBlock(b, lost)
			} else {
				c.lostRevocation(k, old.Touched.UnixNano())
			}
		}
		c.mu.Lock()
		c.dropOtherLocked(ch.Key, ch.Origin)
		c.mu.Unlock()
		return
	}
	if r.Revoked {
		// A previous version's revocation, keyed by the id itself.
		c.mu.Lock()
		c.dropOtherLocked(ch.Key, ch.Origin)
		c.mu.Unlock()
		if k, serial := c.keyOf(ch.Key); serial {
			var added revBits
			b, i := splitSerial(k)
			added.set(i)
			c.revokedElsewhereInBlock(b, added)
		} else {
			c.revokedElsewhere(k)
		}
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.revokedLocked(ch.Key) {
		return // a late record of an ended connection: its node drops it
	}
	if c.others[ch.Key] == nil {
		c.others[ch.Key] = map[crdt.Origin]connRecord{}
	}
	c.others[ch.Key][ch.Origin] = r
	c.indexLocked(ch.Key, r.Info.Principal)
}

// dropOtherLocked forgets origin's record of id. When that was the last
// record of a live id, the id is kept in gone (see Conns.gone).
func (c *Conns) dropOtherLocked(id string, origin crdt.Origin) {
	if byOrigin, ok := c.others[id]; ok {
		delete(byOrigin, origin)
		if len(byOrigin) == 0 {
			delete(c.others, id)
		}
	}
	k, indexed := c.digests[id]
	c.unindexLocked(id)
	if _, still := c.digests[id]; indexed && !still && !c.revokedLocked(id) {
		c.gone[k] = goneID{id: id, at: time.Now().UnixNano()}
	}
}

// goneID is an id whose records went, and when (see Conns.gone).
type goneID struct {
	id string
	at int64
}

// goneFor is how long an id whose records went is kept for a late
// revocation (swept once a minute, so kept one to two minutes).
const goneFor = time.Minute

// revokedElsewhere records a revocation another node holds. The ended
// connection's records go (this node's own is removed from the registry
// by the publisher), and the front forgets what it holds for it here.
func (c *Conns) revokedElsewhere(k revKey) {
	c.mu.Lock()
	c.elsewhere.put(k, struct{}{})
	id, known := c.endedElsewhereLocked(k)
	c.mu.Unlock()
	if f := c.s.front(); known && f != nil {
		// After the lock: the front calls back into Conns.
		f.Forget(id)
	}
}

// endedElsewhereLocked drops what this node holds of the connection whose
// revocation key is k, another node having ended it, and returns its id
// if it knew it (for the front to forget).
func (c *Conns) endedElsewhereLocked(k revKey) (string, bool) {
	id, known := c.ids[k]
	if g, ok := c.gone[k]; ok {
		delete(c.gone, k)
		id, known = g.id, true
	}
	if known {
		if _, live := c.mine[id]; live {
			delete(c.mine, id)
			c.dirty[id] = true
			c.kick.Kick()
		}
		delete(c.others, id)
		c.unindexLocked(id)
	}
	return id, known
}

// lostRevocation keeps a revocation another node held when it leaves that
// node's partition (hidden, dropped, or replaced by a restart's new epoch)
// while the id is still valid: this node then holds it in its own
// partition, with the original time, so it expires when the original
// would have. One removed at its expiry (by its holder's sweep) is not
// copied: copying needs a margin before the expiry, so two nodes never
// copy each other's revocations back and forth.
func (c *Conns) lostRevocation(k revKey, at int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.elsewhere.remove(k)
	if time.Since(time.Unix(0, at)) > c.s.connMaxAge-revocationCopyMargin {
		return
	}
	if at <= c.floorLocked() {
		return // its holder trimmed it under a floor that covers it
	}
	if c.ended.has(k) {
		return
	}
	c.ended.put(k, revTimeOf(at))
	c.dirty[k.regKey()] = true
	c.trimLocked()
	c.kick.Kick()
}

// revocationCopyMargin is how long before its expiry a revocation that
// leaves another node's partition is no longer copied (see lostRevocation).
const revocationCopyMargin = time.Minute

// revoked is the previous version's record of an ended connection, under
// the id's own key: what a node writes besides its revocation key while a
// peer does not read those, and what merge treats as ending a connection.
func revoked(now time.Time) connRecord { return connRecord{Revoked: true, Touched: now} }

// digestLocked returns id's revocation key, from the index when id is
// live (no hashing on a request's path), and whether it is a serial (kept
// by block) rather than a digest (see keyOf).
func (c *Conns) digestLocked(id string) (revKey, bool) {
	if k, ok := c.digests[id]; ok {
		return k, c.serialForm(id)
	}
	return c.keyOf(id)
}

// indexLocked adds id, live here or elsewhere, to the digest index, and
// to principal's ids when a record names one.
func (c *Conns) indexLocked(id, principal string) {
	if principal != "" && !slices.Contains(c.principals[id], principal) {
		c.principals[id] = append(c.principals[id], principal)
		set := c.byPrincipal[principal]
		if set == nil {
			set = map[string]struct{}{}
			c.byPrincipal[principal] = set
		}
		set[id] = struct{}{}
	}
	if _, ok := c.digests[id]; ok {
		return
	}
	k, _ := c.keyOf(id)
	c.digests[id] = k
	c.ids[k] = id
}

// unindexLocked drops id from the digest index once no record of it is
// kept.
func (c *Conns) unindexLocked(id string) {
	if _, live := c.mine[id]; live || len(c.others[id]) > 0 {
		return
	}
	if k, ok := c.digests[id]; ok {
		delete(c.digests, id)
		delete(c.ids, k)
	}
	for _, p := range c.principals[id] {
		delete(c.byPrincipal[p], id)
		if len(c.byPrincipal[p]) == 0 {
			delete(c.byPrincipal, p)
		}
	}
	delete(c.principals, id)
}

// revokedLocked reports whether any node ended connection id.
func (c *Conns) revokedLocked(id string) bool {
	k, serial := c.digestLocked(id)
	_, own := c.endedAtLocked(k, serial)
	return own || c.elsewhereLocked(k, serial)
}

// mineLocked returns this node's view of id: its own live record, or a
// revocation (this node's or another's: this node's live record of it went
// when that arrived).
func (c *Conns) mineLocked(id string) (connRecord, bool) {
	k, serial := c.digestLocked(id)
	if at, ok := c.endedAtLocked(k, serial); ok {
		return revoked(time.Unix(0, at)), true
	}
	if c.elsewhereLocked(k, serial) {
		return revoked(time.Time{}), true
	}
	r, ok := c.mine[id]
	return r, ok
}

// ownEntryLocked returns what this node publishes under a registry key of
// its partition: a revocation's time, a live record, or a previous
// version's revocation; ok is false when it publishes nothing there.
func (c *Conns) ownEntryLocked(key string) (value []byte, ok bool, err error) {
	if key == floorKey {
		return encodeRevocation(c.floor), c.floor != 0, nil
	}
	if b, isBlock := parseBlockKey(key); isBlock {
		blk := c.endedBlocks[b]
		if blk == nil {
			return nil, false, nil
		}
		return blk.encode(), true, nil
	}
	if k, isRev := parseRevKey(key); isRev {
		at, ok := c.ended.get(k)
		if !ok {
			return nil, false, nil
		}
		return encodeRevocation(at.nanos()), true, nil
	}
	if at, ok := c.legacy[key]; ok {
		b, err := json.Marshal(revoked(time.Unix(0, at)))
		return b, true, err
	}
	r, ok := c.mine[key]
	if !ok {
		return nil, false, nil
	}
	b, err := json.Marshal(r)
	return b, true, err
}

// endLocked makes this node's revocation of id at time at: the live
// record goes, and, with legacy, a revoked record in the previous form
// takes its key. It returns the revocation's registry key.
func (c *Conns) endLocked(id string, at int64, legacy bool) string {
	k, serial := c.digestLocked(id)
	var key string
	if serial {
		key = c.endSerialLocked(k, at)
	} else {
		c.ended.put(k, revTimeOf(at))
		c.elsewhere.remove(k)
		key = k.regKey()
	}
	delete(c.gone, k)
	c.dirty[key] = true
	if legacy {
		c.legacy[id] = at
	}
	delete(c.mine, id)
	delete(c.others, id)
	c.unindexLocked(id)
	c.dirty[id] = true
	c.trimLocked()
	return key
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
// applied by every live peer before Delete returns (as Put). While a live
// peer runs a version that does not read revocation keys, the revocation
// is also written in the form it reads.
func (c *Conns) Delete(id string) {
	if id == "" {
		return
	}
	legacy := c.s.peerLacks(cluster.CapRevocationKeys)
	c.mu.Lock()
	if c.revokedLocked(id) {
		c.mu.Unlock()
		return // ended already (here, or elsewhere: that node holds it)
	}
	key := c.endLocked(id, time.Now().UnixNano(), legacy)
	c.mu.Unlock()
	// The revocation first: a peer never sees the live record gone
	// without the revocation that ended it.
	c.commit(key, id)
}

// commit writes this node's entries under keys now, in order, and waits,
// within the AckTimeout, until every live peer has applied them. A peer
// that misses the bound is logged and counted, and refuses the connection
// until it has caught up (its lease lapsed before commit returns; see
// CanServe).
func (c *Conns) commit(keys ...string) {
	self := c.s.cl.Origin()
	wrote := false
	for _, key := range keys {
		if key == "" {
			continue
		}
		c.mu.Lock()
		b, own, err := c.ownEntryLocked(key)
		delete(c.dirty, key)
		c.mu.Unlock()
		switch {
		case err != nil:
		case own:
			err = c.reg.Put(key, b)
			wrote = wrote || err == nil
		default:
			if _, held := c.reg.Get(self, key); held {
				err = c.reg.Remove(key)
				wrote = wrote || err == nil
			}
		}
		if err != nil {
			c.s.log.Warn("publishing connection record", "key", key, "err", err)
		}
	}
	if !wrote {
		return // nothing of this node's changed (e.g. ended on another node)
	}
	clock := c.s.cl.Clock()
	ctx, cancel := clockwork.WithTimeout(context.Background(), clock, c.s.ackTimeout)
	defer cancel()
	start := clock.Now()
	// A peer that misses the bound has lost its lease when AwaitPeers
	// returns: it refuses the connection (CanServe) until it caught up.
	err := c.reg.AwaitPeers(ctx)
	c.s.met.connAck(clock.Since(start), err == nil)
	if err != nil {
		c.s.log.Warn("connection state not applied by every live peer in time", "keys", keys, "err", err)
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
// Every request asks, so a live id is looked up by its indexed digest,
// without hashing or copying.
func (c *Conns) Revoked(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.revokedLocked(id)
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

// update changes this node's live record of id with fn. An ended
// connection learns nothing more: a late request's facts must not bring
// its record back.
func (c *Conns) update(id string, fn func(*connRecord)) {
	if id == "" {
		return
	}
	c.mu.Lock()
	if c.revokedLocked(id) {
		c.mu.Unlock()
		return
	}
	r := c.mine[id]
	fn(&r)
	if r.Revoked {
		c.endLocked(id, time.Now().UnixNano(), false)
	} else {
		r.Touched = time.Now()
		c.mine[id] = r
		c.indexLocked(id, r.Info.Principal)
		c.dirty[id] = true
	}
	c.mu.Unlock()
	c.kick.Kick()
}

// flush writes this node's changed entries to the registry: puts first,
// so a revocation is out before the live record it ends is removed.
func (c *Conns) flush() {
	self := c.s.cl.Origin()
	c.mu.Lock()
	batch := make(map[string][]byte, len(c.dirty))
	var gone []string
	for key := range c.dirty {
		b, own, err := c.ownEntryLocked(key)
		switch {
		case err != nil:
			c.s.log.Warn("encoding a connection record", "key", key, "err", err)
		case own:
			batch[key] = b
		default:
			gone = append(gone, key)
		}
	}
	c.dirty = map[string]bool{}
	c.mu.Unlock()
	for key, b := range batch {
		if err := c.reg.Put(key, b); err != nil {
			c.s.log.Warn("publishing connection record", "key", key, "err", err)
		}
	}
	for _, key := range gone {
		if _, held := c.reg.Get(self, key); !held {
			continue
		}
		if err := c.reg.Remove(key); err != nil {
			c.s.log.Warn("removing a connection record", "key", key, "err", err)
		}
	}
}

// sweep forgets this node's records (revocations included) untouched for
// longer than maxAge: the session ids they describe are expired by then
// (mcp.Config.SessionMaxAge), so nobody can present them any more.
func (c *Conns) sweep(now time.Time, maxAge time.Duration) {
	c.sweepWith(now, maxAge, c.reg.Remove)
}

// sweepWith is sweep, removing registry keys with remove.
func (c *Conns) sweepWith(now time.Time, maxAge time.Duration, remove func(key string) error) {
	expired := func(at int64) bool { return now.Sub(time.Unix(0, at)) > maxAge }
	c.mu.Lock()
	var old []string
	for id, r := range c.mine {
		if now.Sub(r.Touched) > maxAge {
			old = append(old, id)
			delete(c.mine, id)
			delete(c.dirty, id)
			c.unindexLocked(id)
		}
	}
	c.ended.removeIf(func(k revKey, at revTime) bool {
		if !expired(at.nanos()) {
			return false
		}
		old = append(old, k.regKey())
		delete(c.dirty, k.regKey())
		return true
	})
	for b, blk := range c.endedBlocks {
		if expired(blk.at) {
			delete(c.endedBlocks, b)
			c.endedSerials -= blk.bits.count()
			old = append(old, b.regKey())
			delete(c.dirty, b.regKey())
		}
	}
	for id, at := range c.legacy {
		if expired(at) {
			old = append(old, id)
			delete(c.legacy, id)
			delete(c.dirty, id)
		}
	}
	for k, g := range c.gone {
		if now.Sub(time.Unix(0, g.at)) > goneFor {
			delete(c.gone, k)
		}
	}
	if c.floor != 0 && expired(c.floor) {
		// Every id it covered has expired by now.
		c.floor = 0
		old = append(old, floorKey)
		delete(c.dirty, floorKey)
	}
	c.mu.Unlock()
	for _, key := range old {
		if err := remove(key); err != nil {
			c.s.log.Warn("forgetting an expired connection record", "key", key, "err", err)
		}
	}
}

// restore loads this node's entries restored from disk into memory. A
// revocation stored by a previous version under the id's own key is kept
// in that form too (it expires with its age) and gains its revocation key.
func (c *Conns) restore() {
	self := c.s.cl.Origin()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reg.Range(func(e crdt.Entry) bool {
		if e.Origin != self {
			return true
		}
		if e.Key == floorKey {
			if at, ok := decodeRevocation(e.Value); ok {
				c.floor = max(c.floor, at)
			}
			return true
		}
		if k, ok := parseRevKey(e.Key); ok {
			if at, ok := decodeRevocation(e.Value); ok {
				c.ended.put(k, revTimeOf(at))
			}
			return true
		}
		if b, ok := parseBlockKey(e.Key); ok {
			if blk, ok := decodeBlock(e.Value); ok && c.endedBlocks[b] == nil {
				c.endedBlocks[b] = &blk
				c.endedSerials += blk.bits.count()
			}
			return true
		}
		var r connRecord
		if json.Unmarshal(e.Value, &r) != nil {
			return true
		}
		if r.Revoked {
			at := r.Touched.UnixNano()
			k, serial := c.keyOf(e.Key)
			c.legacy[e.Key] = at
			// A serial id's block was written beside it and restored.
			if !serial && !c.ended.has(k) {
				c.ended.put(k, revTimeOf(at))
				c.dirty[k.regKey()] = true
			}
			return true
		}
		r.StreamNode = "" // streams do not survive a restart
		c.mine[e.Key] = r
		c.indexLocked(e.Key, r.Info.Principal)
		return true
	})
}

// SpendState implements mcp.Connections: the nonce's holders decide (see
// Nonces.Spend).
func (c *Conns) SpendState(ctx context.Context, tool, nonce string, expires time.Time) (already bool) {
	return c.s.nonces.Spend(ctx, tool, nonce, expires)
}

var _ mcp.Connections = (*Conns)(nil)
