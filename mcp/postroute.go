package mcp

import "sync"

// postRoutes delivers backend notifications (tools and resource changes)
// for a Streamable HTTP connection with no stream on this node through
// one of its running POSTs here, or keeps them for its next POST here.
type postRoutes struct {
	mu      sync.Mutex
	posts   map[string][]*eventStream
	pending map[string][][]byte
}

func newPostRoutes() *postRoutes {
	return &postRoutes{posts: map[string][]*eventStream{}, pending: map[string][][]byte{}}
}

// begin registers a POST of connection sid, which takes what waits for it.
func (r *postRoutes) begin(sid string, p *eventStream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.posts[sid] = append(r.posts[sid], p)
	for _, n := range r.pending[sid] {
		p.enqueue(n)
	}
	delete(r.pending, sid)
}

// end unregisters a POST whose answer is about to be written.
func (r *postRoutes) end(sid string, p *eventStream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ps := r.posts[sid]
	for i, q := range ps {
		if q == p {
			ps = append(ps[:i:i], ps[i+1:]...)
			break
		}
	}
	if len(ps) == 0 {
		delete(r.posts, sid)
	} else {
		r.posts[sid] = ps
	}
}

// route delivers msg to a running POST of sid, or, when hold, keeps it
// for the next one (dropped when maxQueued already wait). taken is false
// when neither applies.
func (r *postRoutes) route(sid string, msg []byte, hold bool) (taken, dropped bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ps := r.posts[sid]
	for i := len(ps) - 1; i >= 0; i-- {
		if ps[i].enqueue(msg) {
			return true, false
		}
	}
	if !hold {
		return false, false
	}
	if len(r.pending[sid]) >= maxQueued {
		return true, true
	}
	r.pending[sid] = append(r.pending[sid], msg)
	return true, false
}

// forget drops what waits for an ended connection.
func (r *postRoutes) forget(sid string) {
	r.mu.Lock()
	delete(r.pending, sid)
	r.mu.Unlock()
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
