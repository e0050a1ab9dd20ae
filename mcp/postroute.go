package mcp

import (
	"hash/maphash"
	"sync"
)

// postRoutes delivers backend notifications (tools and resource changes)
// for a Streamable HTTP connection with no stream on this node through
// one of its running POSTs here, or keeps them for its next POST here.
// Every POST of a connection begins and ends here: the table is split in
// shards by connection, so calls of different connections do not queue on
// one lock.
type postRoutes struct {
	seed   maphash.Seed
	shards [routeShards]routeShard
}

const routeShards = 16

type routeShard struct {
	mu      sync.Mutex
	posts   map[string][]*eventStream
	pending map[string][][]byte
}

func newPostRoutes() *postRoutes {
	r := &postRoutes{seed: maphash.MakeSeed()}
	for i := range r.shards {
		r.shards[i] = routeShard{posts: map[string][]*eventStream{}, pending: map[string][][]byte{}}
	}
	return r
}

func (r *postRoutes) shard(sid string) *routeShard {
	return &r.shards[maphash.String(r.seed, sid)%routeShards]
}

// begin registers a POST of connection sid, which takes what waits for it.
func (r *postRoutes) begin(sid string, p *eventStream) {
	sh := r.shard(sid)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.posts[sid] = append(sh.posts[sid], p)
	for _, n := range sh.pending[sid] {
		p.enqueue(n)
	}
	delete(sh.pending, sid)
}

// end unregisters a POST whose answer is about to be written.
func (r *postRoutes) end(sid string, p *eventStream) {
	sh := r.shard(sid)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ps := sh.posts[sid]
	for i, q := range ps {
		if q == p {
			ps = append(ps[:i:i], ps[i+1:]...)
			break
		}
	}
	if len(ps) == 0 {
		delete(sh.posts, sid)
	} else {
		sh.posts[sid] = ps
	}
}

// route delivers msg to a running POST of sid, or, when hold, keeps it
// for the next one (dropped when maxQueued already wait). taken is false
// when neither applies.
func (r *postRoutes) route(sid string, msg []byte, hold bool) (taken, dropped bool) {
	sh := r.shard(sid)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ps := sh.posts[sid]
	for i := len(ps) - 1; i >= 0; i-- {
		if ps[i].enqueue(msg) {
			return true, false
		}
	}
	if !hold {
		return false, false
	}
	if len(sh.pending[sid]) >= maxQueued {
		return true, true
	}
	sh.pending[sid] = append(sh.pending[sid], msg)
	return true, false
}

// forget drops what waits for an ended connection.
func (r *postRoutes) forget(sid string) {
	sh := r.shard(sid)
	sh.mu.Lock()
	delete(sh.pending, sid)
	sh.mu.Unlock()
}

// deliver queues msg for connection c: on its stream here, else through
// a POST of it here (or for its next one); false when it was dropped.
func (s *Server) deliver(c *conn, msg []byte) bool {
	if c.out != nil && c.out.enqueue(msg) {
		return true
	}
	if c.listen != nil || c.id == "" {
		return false
	}
	taken, dropped := s.posts.route(c.id, msg, true)
	return taken && !dropped
}
