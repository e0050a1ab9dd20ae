package mcp

import (
	"slices"
	"sync"
	"time"
)

// DefaultConnectionsPerPrincipal is the connections one authenticated
// principal may hold active across the swarm when the policy does not say
// (limits.connections_per_principal). See docs/SECURITY.md for the sizing.
const DefaultConnectionsPerPrincipal = 64

// ConnActivity is one live connection of a principal as the cluster's
// registry knows it: its id, the last time any node wrote its record, and
// whether some node holds its GET stream (a listening client is active
// however long ago it last wrote).
type ConnActivity struct {
	ID        string
	LastWrite time.Time
	Streaming bool
}

// connCap bounds the connections of one authenticated principal across
// the swarm. Records live for the session id's 7 days unless the client
// sends DELETE, which most clients do not (mcp-go's client sends it without
// the bearer token), so refusing at a count would lock out a principal whose
// clients simply reconnect; instead an initialize that would pass the bound
// revokes the principal's least recently active connections, as session
// managers commonly do for logins (Spring Security's concurrent-session
// control by default). A client that comes back to a revoked one gets 404
// and initializes again, as the MCP transport prescribes. Connections whose
// GET or SSE stream some node holds go last: a client listens on them now.
type connCap struct {
	limit int
	// idle is how long this node remembers serving a request on a
	// connection (the front forgets the connection's node-local state after
	// it too).
	idle time.Duration
	// registry lists a principal's connections across the cluster; front
	// revokes the connections the cap evicts.
	registry Connections
	front    capFront

	mu sync.Mutex
	// seen is when this node last served a request on a connection of an
	// authenticated principal: node-local, never replicated, so activity
	// costs no cluster write. Entries older than the idle window are
	// pruned as the map grows.
	seen      map[string]time.Time
	pruneSize int
}

// capFront is the front as the connection cap needs it.
type capFront interface {
	// evict revokes connection id across the cluster.
	evict(id string)
	// holdsStream reports whether this node holds a stream of connection
	// id (a legacy SSE stream, whose node writes no stream record).
	holdsStream(id string) bool
}

// attach makes the cap bound the principals' connections in registry,
// evicting through front.
func (c *connCap) attach(registry Connections, front capFront) {
	c.registry, c.front = registry, front
}

func newConnCap(limit int, idle time.Duration) *connCap {
	if limit <= 0 {
		limit = DefaultConnectionsPerPrincipal
	}
	return &connCap{limit: limit, idle: idle, seen: map[string]time.Time{}, pruneSize: 1024}
}

// touch records that this node served a request on connection id now.
func (c *connCap) touch(id string, now time.Time) {
	if id == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[id] = now
	if len(c.seen) < c.pruneSize {
		return
	}
	for k, at := range c.seen {
		if now.Sub(at) > c.idle {
			delete(c.seen, k)
		}
	}
	c.pruneSize = max(1024, 2*len(c.seen))
}

// forget drops connection id's activity: the connection ended (a DELETE
// here or elsewhere, or the idle prune), so it is never evicted again
// and its ~105-byte id is not kept until the idle window prunes it.
func (c *connCap) forget(id string) {
	c.mu.Lock()
	delete(c.seen, id)
	c.mu.Unlock()
}

// size is how many connections' activity is remembered.
func (c *connCap) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// admit makes room for one more connection of principal: it revokes the
// principal's least recently active connections beyond limit−1 and returns
// their ids.
func (c *connCap) admit(principal string) []string {
	if principal == "" {
		return nil
	}
	conns := c.registry.OfPrincipal(principal, c.limit)
	if len(conns) < c.limit {
		return nil
	}
	for i := range conns {
		conns[i].Streaming = conns[i].Streaming || c.front.holdsStream(conns[i].ID)
	}
	c.mu.Lock()
	evict := planEviction(conns, c.seen, c.limit)
	for _, id := range evict {
		delete(c.seen, id)
	}
	c.mu.Unlock()
	for _, id := range evict {
		c.front.evict(id)
	}
	return evict
}

// planEviction is the pure rule of connCap.admit: of a principal's live
// connections conns (and this node's last request on each, seen), the ones
// to revoke so that one more fits under limit: those without a stream
// before those with one, each group least recently active first (the later
// of the last record write and this node's last request).
func planEviction(conns []ConnActivity, seen map[string]time.Time, limit int) []string {
	need := len(conns) - limit + 1
	if need <= 0 {
		return nil
	}
	type entry struct {
		id        string
		last      time.Time
		streaming bool
	}
	all := make([]entry, 0, len(conns))
	for _, a := range conns {
		last := a.LastWrite
		if s, ok := seen[a.ID]; ok && s.After(last) {
			last = s
		}
		all = append(all, entry{a.ID, last, a.Streaming})
	}
	slices.SortStableFunc(all, func(a, b entry) int {
		if a.streaming != b.streaming {
			if a.streaming {
				return 1
			}
			return -1
		}
		return a.last.Compare(b.last)
	})
	evict := make([]string, 0, need)
	for _, e := range all[:need] {
		evict = append(evict, e.id)
	}
	return evict
}

// evict ends connection id cluster-wide to make room for a new one of its
// principal: the revocation every node honours (as a DELETE's), then this
// node's own state of it.
func (s *Server) evict(id string) {
	s.log.Debug("revoking the least recently active connection of a principal at limits.connections_per_principal", "conn", id)
	s.registry.Delete(id)
	s.Forget(id)
}

// holdsStream reports whether this node holds a stream of connection id:
// a legacy SSE stream or a Streamable HTTP GET stream.
func (s *Server) holdsStream(id string) bool {
	_, sse := s.streams.get(id)
	return sse || s.streams.holdsGET(id)
}
