package mcp

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/authz"
)

// conn is a connection known on this node: its home node (initialize ran
// here), a node holding its GET stream, or one it subscribed through.
type conn struct {
	id        string
	principal authz.Principal
	// out is the connection's stream here (a GET, a legacy SSE stream,
	// stdout); nil when it has none here, and then a notification goes
	// to one of its running POSTs or waits for the next (postRoutes).
	out  sink
	subs map[string]bool
	// listen, when set, marks a 2026-07-28 subscriptions/listen stream:
	// what it gets is its filter, not subs.
	listen *mcp.SubscriptionFilter
	// subID is the listen request's id, which tags what it gets.
	subID any
	// home marks a connection initialized on this node.
	home bool
	// seen is when this node last served the connection (unix ns), for
	// the idle prune; written without the table's lock.
	seen atomic.Int64
}

// connTable tracks this node's registered connections and their resource
// subscriptions. Connections are indexed by principal subject, so a change
// to one principal's session visits that principal's connections (and the
// admins') instead of every connection on the node.
type connTable struct {
	// mu is read-locked by the per-call lookups (session, match: every
	// resource change of a click matches its owner's connections, with
	// registry lookups inside) so they do not queue behind each other.
	mu    sync.RWMutex
	conns map[string]*conn
	// bySubject indexes conns by principal subject; admins holds those
	// whose principal has the admin role (they own every session). Slices,
	// not maps: most subjects hold one connection (every anonymous
	// connection is its own subject), and a map each cost 300 B per
	// connection.
	bySubject map[string][]*conn
	admins    []*conn
	// registry is the cluster's connection registry: it says which node sends a connection's notifications, and holds
	// the subscriptions made through other nodes.
	registry Connections
	// idle is how long a connection with no stream here stays known
	// after this node last served it; pruneAt is the size at which the
	// next request prunes such connections (so no timer runs for them).
	idle    time.Duration
	pruneAt int
}

func newConnTable(registry Connections, idle time.Duration) *connTable {
	return &connTable{conns: make(map[string]*conn), bySubject: make(map[string][]*conn), registry: registry,
		idle: idle, pruneAt: minPrune}
}

// minPrune is the table size below which idle connections are not pruned.
const minPrune = 1024

// touch records that this node served connection id now. When the table
// has grown past pruneAt, it forgets the connections idle for longer than
// the idle window that hold no stream here, and returns their ids.
func (t *connTable) touch(id string, now time.Time) (forgotten []string) {
	// Every request touches: only a prune takes the write lock.
	t.mu.RLock()
	c, ok := t.conns[id]
	prune := len(t.conns) >= t.pruneAt
	t.mu.RUnlock()
	if ok {
		c.seen.Store(now.UnixNano())
	}
	if !prune {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.conns) < t.pruneAt {
		return nil // another request pruned meanwhile
	}
	for k, c := range t.conns {
		if c.out == nil && c.listen == nil && now.UnixNano()-c.seen.Load() > int64(t.idle) {
			t.drop(k)
			forgotten = append(forgotten, k)
		}
	}
	t.pruneAt = max(minPrune, 2*len(t.conns))
	return forgotten
}

// put stores c under key in conns and the indexes. Callers hold mu.
func (t *connTable) put(key string, c *conn) {
	t.drop(key)
	t.conns[key] = c
	t.bySubject[c.principal.Subject] = append(t.bySubject[c.principal.Subject], c)
	if c.principal.IsAdmin() {
		t.admins = append(t.admins, c)
	}
}

// drop removes key from conns and the indexes. Callers hold mu.
func (t *connTable) drop(key string) {
	c, ok := t.conns[key]
	if !ok {
		return
	}
	delete(t.conns, key)
	if rest := without(t.bySubject[c.principal.Subject], c); len(rest) > 0 {
		t.bySubject[c.principal.Subject] = rest
	} else {
		delete(t.bySubject, c.principal.Subject)
	}
	t.admins = without(t.admins, c)
}

// without removes c from cs, in place (order does not matter).
func without(cs []*conn, c *conn) []*conn {
	for i, x := range cs {
		if x == c {
			last := len(cs) - 1
			cs[i], cs[last] = cs[last], nil
			return cs[:last]
		}
	}
	return cs
}

// add registers connection id here: home, once it initialized here; out,
// its stream here (nil keeps the one it has).
func (t *connTable) add(id string, p authz.Principal, home bool, out sink) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := &conn{id: id, principal: p, home: home, out: out}
	c.seen.Store(time.Now().UnixNano())
	if old, ok := t.conns[id]; ok {
		c.subs, c.home = old.subs, old.home || home // subs made on the first subscription: most connections never subscribe
		if out == nil {
			c.out = old.out
		}
	}
	t.put(id, c)
}

// release drops connection id's stream out here, if it is still the one
// registered; the connection stays known (subscriptions, home).
func (t *connTable) release(id string, out sink) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.conns[id]; ok && c.out == out {
		c.out = nil
		if !c.home && len(c.subs) == 0 {
			t.drop(id)
		}
	}
}

func (t *connTable) addListen(key string, p authz.Principal, f mcp.SubscriptionFilter, subID any, out sink) {
	t.mu.Lock()
	t.put(key, &conn{id: key, principal: p, out: out, listen: &f, subID: subID})
	t.mu.Unlock()
}

func (t *connTable) size() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.conns)
}

func (t *connTable) remove(id string) {
	t.mu.Lock()
	t.drop(id)
	t.mu.Unlock()
}

func (t *connTable) subscribe(id string, p authz.Principal, uri string, on bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.conns[id]
	if !ok {
		// Subscribed from a node where the connection is not registered:
		// remember it so a later GET stream here gets the updates.
		c = &conn{id: id, principal: p}
		c.seen.Store(time.Now().UnixNano())
		t.put(id, c)
	}
	if on {
		if c.subs == nil {
			c.subs = make(map[string]bool)
		}
		c.subs[uri] = true
	} else {
		delete(c.subs, uri)
	}
}

// audience says which principals a notification may reach.
type audience struct {
	subject string // "" with all: every principal
	all     bool
	admins  bool // also principals with the admin role
}

// ownerOf is the audience of a session owned by subject: the owner and
// admins (authz.Owns).
func ownerOf(subject string) audience { return audience{subject: subject, admins: true} }

// principalOnly is the audience of exactly the principal subject.
func principalOnly(subject string) audience { return audience{subject: subject} }

// everyone is every principal.
var everyone = audience{all: true}

func (a audience) keeps(p authz.Principal) bool {
	switch {
	case a.all:
		return true
	case a.admins:
		return authz.Owns(p, a.subject)
	default:
		return p.Subject == a.subject
	}
}

// match returns the connections to send method (about uri, for
// resources/updated) whose principal is in aud: connections that
// subscribed to uri (or any, for list changes) and this node notifies,
// and 2026-07-28 listen streams whose filter opted in. The cheap local
// checks run before the registry lookups (whether this node delivers,
// subscriptions made elsewhere).
func (t *connTable) match(method, uri string, aud audience) []*conn {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out []*conn
	visit := func(c *conn) {
		if !aud.keeps(c.principal) {
			return
		}
		if c.listen != nil {
			if listenWants(*c.listen, method, uri) {
				out = append(out, c)
			}
			return
		}
		if c.out == nil && !c.home {
			return // known for its subscriptions only: no way to it here
		}
		if uri != "" && !c.subs[uri] && !subscribedVia(t.registry, c.id, uri) {
			return
		}
		if !t.registry.NotifyHere(c.id) {
			return
		}
		out = append(out, c)
	}
	if aud.all {
		for _, c := range t.conns {
			visit(c)
		}
		return out
	}
	for _, c := range t.bySubject[aud.subject] {
		visit(c)
	}
	if aud.admins {
		for _, c := range t.admins {
			if c.principal.Subject != aud.subject {
				visit(c)
			}
		}
	}
	return out
}
