package mcp

import (
	"fmt"
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

// PrincipalConns is implemented by a Connections that can list a
// principal's live connections cluster-wide (the swarm's registry).
type PrincipalConns interface {
	// OfPrincipal returns principal's live connections.
	OfPrincipal(principal string) []ConnActivity
}

// connCap bounds the connections of one authenticated principal across
// the swarm. A connection counts while it is active: its record was written
// (initialize, log level, subscriptions, a GET stream) or this node served
// a request on it within the idle window. Records live for the session
// id's 7 days unless the client sends DELETE, which most clients do not,
// so counting every record would lock a principal out for a week; counting
// only the active ones would let idle records pile up. So an initialize
// over the bound first revokes the principal's idle connections, least
// recently active first (a client that comes back to one gets 404 and
// initializes again, as the MCP transport prescribes), and is refused only
// when every counted connection is active.
type connCap struct {
	limit int
	idle  time.Duration
	// list and revoke reach the cluster's registry; list is nil on a lone
	// node, which stores no connection records (mcp-go forgets an idle
	// connection after the idle window), and then nothing is bounded here.
	list   func(principal string) []ConnActivity
	revoke func(id string)
	// holds reports whether this node holds a stream of connection id
	// (a legacy SSE stream, whose node writes no stream record).
	holds func(id string) bool

	mu sync.Mutex
	// seen is when this node last served a request on a connection of an
	// authenticated principal: node-local, never replicated, so activity
	// costs no cluster write. Entries older than the idle window are
	// pruned as the map grows.
	seen      map[string]time.Time
	pruneSize int
}

func newConnCap(limit int, idle time.Duration) *connCap {
	if limit <= 0 {
		limit = DefaultConnectionsPerPrincipal
	}
	return &connCap{limit: limit, idle: idle, seen: map[string]time.Time{}, pruneSize: 1024}
}

// touch records that this node served a request on connection id now.
func (c *connCap) touch(id string, now time.Time) {
	if c == nil || c.list == nil || id == "" {
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

// admit decides a new initialize of principal at now: it revokes idle
// connections to make room and returns an error naming the bound when the
// principal's active connections fill it.
func (c *connCap) admit(principal string, now time.Time) error {
	if c == nil || c.list == nil || principal == "" {
		return nil
	}
	conns := c.list(principal)
	if len(conns) < c.limit {
		return nil
	}
	if c.holds != nil {
		for i := range conns {
			conns[i].Streaming = conns[i].Streaming || c.holds(conns[i].ID)
		}
	}
	c.mu.Lock()
	evict, active, ok := planAdmission(conns, c.seen, now, c.idle, c.limit)
	for _, id := range evict {
		delete(c.seen, id)
	}
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("initialize: principal %q holds %d connections active within the last %s across the swarm; at most %d are allowed (policy limits.connections_per_principal); end one with an HTTP DELETE, or retry once one has been idle for %s",
			principal, active, c.idle, c.limit, c.idle)
	}
	for _, id := range evict {
		c.revoke(id)
	}
	return nil
}

// planAdmission is the pure rule of connCap.admit: with the principal's
// live connections conns (and this node's last request on each, seen), it
// returns the idle connections (no stream, no write and no request here
// within idle) to revoke, least recently active first, so
// that one more fits under limit; or ok false and the number of active
// connections when not enough of them are idle.
func planAdmission(conns []ConnActivity, seen map[string]time.Time, now time.Time, idle time.Duration, limit int) (evict []string, active int, ok bool) {
	need := len(conns) - limit + 1
	if need <= 0 {
		return nil, 0, true
	}
	type entry struct {
		id   string
		last time.Time
	}
	var idleOnes []entry
	for _, a := range conns {
		last := a.LastWrite
		if s, ok := seen[a.ID]; ok && s.After(last) {
			last = s
		}
		if !a.Streaming && now.Sub(last) > idle {
			idleOnes = append(idleOnes, entry{a.ID, last})
		} else {
			active++
		}
	}
	if len(idleOnes) < need {
		return nil, active, false
	}
	slices.SortStableFunc(idleOnes, func(a, b entry) int { return a.last.Compare(b.last) })
	for _, e := range idleOnes[:need] {
		evict = append(evict, e.id)
	}
	return evict, active, true
}

// evict ends connection id cluster-wide to make room for a new one of its
// principal: the revocation every node honours (as a DELETE's), then this
// node's own state of it.
func (s *Server) evict(id string) {
	s.log.Info("revoking an idle connection: its principal reached limits.connections_per_principal", "conn", id)
	s.registry.Delete(id)
	s.Forget(id)
}

// holdsStream reports whether this node holds a stream of connection id:
// a legacy SSE stream or a Streamable HTTP GET stream.
func (s *Server) holdsStream(id string) bool {
	_, sse := s.streams.get(id)
	return sse || s.streams.holdsGET(id)
}
