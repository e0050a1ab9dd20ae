package swarm

import (
	"slices"
	"sort"
	"sync"

	"github.com/mcpswarm/mcpswarm/crdt"
	"github.com/mcpswarm/mcpswarm/session"
)

// index holds the decoded, visible contents of the sessions and tools
// registries, kept current by their change feeds, so answering a request
// (every request installs the caller's tool view) never decodes JSON.
type index struct {
	mu       sync.RWMutex
	sessions map[string]perOrigin[sessionRecord]
	tools    map[string]perOrigin[toolsRecord]
	// views caches each principal's tool list ("" for admins: every tool);
	// a change to a principal's sessions drops its entry and the admins'.
	views map[string][]session.Tool
	// departed keeps the last tools record of a session whose every tools
	// record went away (a drained sender left) while the session is still
	// visible: its adopter's tools record is on its way, and a handoff
	// keeps the sticky set, so calls meanwhile still find their tool.
	departed map[string]toolsRecord
	// pending marks sessions whose sender left before its adopter's
	// record arrived here: their departed tools stay listed meanwhile.
	pending map[string]bool
	// named indexes session ids by the principals their session and tools
	// records name (principal -> id -> how many records), so what one
	// principal holds is found without visiting every session of the
	// swarm: a start (the session cap), a listing and a rebuilt tool view
	// cost what the principal has, not what the cluster has.
	named map[string]map[string]int
}

func newIndex() *index {
	return &index{
		sessions: map[string]perOrigin[sessionRecord]{},
		tools:    map[string]perOrigin[toolsRecord]{},
		views:    map[string][]session.Tool{},
		departed: map[string]toolsRecord{},
		pending:  map[string]bool{},
		named:    map[string]map[string]int{},
	}
}

// name records that one more record names principal for session id; x.mu
// must be held.
func (x *index) name(principal, id string) {
	ids := x.named[principal]
	if ids == nil {
		ids = map[string]int{}
		x.named[principal] = ids
	}
	ids[id]++
}

// unname drops one record naming principal for session id; x.mu must be
// held.
func (x *index) unname(principal, id string) {
	ids := x.named[principal]
	if ids[id] <= 1 {
		delete(ids, id)
		if len(ids) == 0 {
			delete(x.named, principal)
		}
		return
	}
	ids[id]--
}

// rename moves one record of id from principal from (when had) to to.
func (x *index) rename(had bool, from, to, id string) {
	if had && from == to {
		return
	}
	if had {
		x.unname(from, id)
	}
	x.name(to, id)
}

// perOrigin holds one value per origin. A session has one record almost
// always (two during a handoff or a duplicate), so a slice searched in
// place: a Go map per session cost a group of eight slots, about 1.2 KB
// for a session record, on every node for every session of the cluster.
type perOrigin[T any] []originValue[T]

type originValue[T any] struct {
	origin crdt.Origin
	v      T
}

func (p perOrigin[T]) get(o crdt.Origin) (T, bool) {
	for _, e := range p {
		if e.origin == o {
			return e.v, true
		}
	}
	var zero T
	return zero, false
}

// set returns p with o's value v; p's array may be reused.
func (p perOrigin[T]) set(o crdt.Origin, v T) perOrigin[T] {
	for i := range p {
		if p[i].origin == o {
			p[i].v = v
			return p
		}
	}
	return append(p, originValue[T]{o, v})
}

// del returns p without o's value; p's array may be reused.
func (p perOrigin[T]) del(o crdt.Origin) perOrigin[T] {
	for i := range p {
		if p[i].origin == o {
			return slices.Delete(p, i, i+1)
		}
	}
	return p
}

func (x *index) setSession(id string, o crdt.Origin, rec *sessionRecord) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if rec == nil {
		if old, ok := x.sessions[id].get(o); ok {
			x.invalidate(old.Principal)
			x.unname(old.Principal, id)
		}
		x.sessions[id] = x.sessions[id].del(o)
		if len(x.sessions[id]) == 0 {
			delete(x.sessions, id)
			if !x.pending[id] {
				delete(x.departed, id) // the session is gone everywhere
			}
		}
		return
	}
	old, had := x.sessions[id].get(o)
	x.rename(had, old.Principal, rec.Principal, id)
	if !had && x.pending[id] {
		delete(x.pending, id) // the adopter's record arrived
		x.invalidate(rec.Principal)
	}
	if !had {
		x.invalidate(rec.Principal) // the winner of a duplicate may change
	}
	x.sessions[id] = x.sessions[id].set(o, *rec)
}

// setTools records (or, with rec nil, forgets) a session's tool set and
// reports whether that changed what the index held: the same record
// arriving twice (written through locally, then echoed by the registry)
// is one change, not two.
func (x *index) setTools(id string, o crdt.Origin, rec *toolsRecord) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	old, had := x.tools[id].get(o)
	if rec == nil {
		if !had {
			return false
		}
		x.invalidate(old.Principal)
		x.unname(old.Principal, id)
		x.tools[id] = x.tools[id].del(o)
		if len(x.tools[id]) == 0 {
			delete(x.tools, id)
			if len(x.sessions[id]) > 0 || x.pending[id] {
				x.departed[id] = old
			}
		}
		return true
	}
	delete(x.departed, id)
	if had && old.Principal == rec.Principal && slices.EqualFunc(old.Tools, rec.Tools, session.Tool.Equal) {
		return false
	}
	x.rename(had, old.Principal, rec.Principal, id)
	x.tools[id] = x.tools[id].set(o, *rec)
	x.invalidate(rec.Principal)
	return true
}

// invalidate drops cached views; x.mu must be held.
func (x *index) invalidate(principal string) {
	delete(x.views, principal)
	delete(x.views, "")
}

// locate returns the record of id that supersedes the others (see
// supersedes): the session, on every node.
func (x *index) locate(id string) (located, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.locateLocked(id)
}

func (x *index) locateLocked(id string) (located, bool) {
	var best located
	found := false
	for _, e := range x.sessions[id] {
		if !found || supersedes(e.v, e.origin.String(), best.rec, best.origin.String()) {
			best, found = located{id: id, rec: e.v, origin: e.origin}, true
		}
	}
	return best, found
}

// idsNaming lists, sorted, the session ids whose session or tools
// records name principal: a superset of those principal owns.
func (x *index) idsNaming(principal string) []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]string, 0, len(x.named[principal]))
	for id := range x.named[principal] {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// owned counts the sessions whose winning record names principal.
func (x *index) owned(principal string) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n := 0
	for id := range x.named[principal] {
		if loc, ok := x.locateLocked(id); ok && loc.rec.Principal == principal {
			n++
		}
	}
	return n
}

// ids lists every visible session id.
func (x *index) ids() []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]string, 0, len(x.sessions))
	for id := range x.sessions {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// toolsOf returns the tools of the sessions principal may see (all when
// admin), from the winning copy of each session. The slice is shared:
// callers must not modify it.
func (x *index) toolsOf(principal string, admin bool) []session.Tool {
	key := principal
	if admin {
		key = ""
	}
	x.mu.RLock()
	v, ok := x.views[key]
	x.mu.RUnlock()
	if ok {
		return v
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []session.Tool
	add := func(id string, byOrigin perOrigin[toolsRecord]) {
		win, ok := x.locateLocked(id)
		if !ok {
			return
		}
		rec, ok := byOrigin.get(win.origin)
		if !ok {
			// The winner's tools have not arrived yet (an adopter's record
			// may overtake its tools record): the sender's set is the same
			// sticky set, so offer it rather than no tools for a moment.
			rec, ok = anyTools(byOrigin)
		}
		if ok && (admin || rec.Principal == principal) {
			out = append(out, rec.Tools...)
		}
	}
	if admin {
		for id, byOrigin := range x.tools {
			add(id, byOrigin)
		}
	} else {
		// Only sessions some record of which names principal can pass.
		for id := range x.named[principal] {
			if byOrigin, ok := x.tools[id]; ok {
				add(id, byOrigin)
			}
		}
	}
	for id, rec := range x.departed {
		if _, has := x.tools[id]; has || (!admin && rec.Principal != principal) {
			continue
		}
		if _, ok := x.locateLocked(id); ok || x.pending[id] {
			out = append(out, rec.Tools...)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	x.views[key] = out
	return out
}

// anyTools returns one of a session's tool records, the same one on every
// call (the least origin).
func anyTools(byOrigin perOrigin[toolsRecord]) (toolsRecord, bool) {
	var best originValue[toolsRecord]
	found := false
	for _, e := range byOrigin {
		if !found || e.origin.String() < best.origin.String() {
			best, found = e, true
		}
	}
	return best.v, found
}

// hasTools reports whether origin o's tools record of session id is here.
func (x *index) hasTools(id string, o crdt.Origin) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	_, ok := x.tools[id].get(o)
	return ok
}

// awaitAdopter marks id as handed off by a sender that left: its tools
// stay listed until a new record of it arrives.
func (x *index) awaitAdopter(id string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.pending[id] = true
	for _, e := range x.tools[id] {
		x.invalidate(e.v.Principal)
	}
}
