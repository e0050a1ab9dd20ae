package mcp

import (
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// maxPendingNotes bounds what waits for a connection's next POST on this
// node, as mcp-go's per-connection channel does (100).
const maxPendingNotes = 100

// postRoutes delivers backend notifications (tools and resource changes)
// for a Streamable HTTP connection without mcp-go's per-connection channel
// whenever a POST can carry them: mcp-go, with an event store configured,
// keeps every POST whose answer carried a notification it forwarded as a
// resumable stream, holding the POST's writer and request, until the
// connection ends (~5 KB a call for a client subscribed to what it
// drives). A notification goes, in this order, to a POST of the connection
// running on this node (its stream writes it before the answer), to the
// connection's GET stream here (through mcp-go's channel, as before), or
// waits for the connection's next POST on this node.
type postRoutes struct {
	mu      sync.Mutex
	posts   map[string][]*postStream
	pending map[string][]mcp.JSONRPCNotification
}

func newPostRoutes() *postRoutes {
	return &postRoutes{posts: map[string][]*postStream{}, pending: map[string][]mcp.JSONRPCNotification{}}
}

// begin registers a POST of connection sid, which takes what waits for it.
func (r *postRoutes) begin(sid string, p *postStream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.posts[sid] = append(r.posts[sid], p)
	for _, n := range r.pending[sid] {
		p.enqueue(n)
	}
	delete(r.pending, sid)
}

// end unregisters a POST whose answer is written, closes its stream and
// returns what reached it too late to be written.
func (r *postRoutes) end(sid string, p *postStream) []mcp.JSONRPCNotification {
	r.mu.Lock()
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
	r.mu.Unlock()
	return p.close()
}

// route delivers n to a running POST of sid, or, when held, keeps it for
// the next one (dropped when 100 already wait). taken is false when
// neither applies: the caller uses mcp-go's channel (a GET stream here).
func (r *postRoutes) route(sid string, n mcp.JSONRPCNotification, held bool) (taken, dropped bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ps := r.posts[sid]
	for i := len(ps) - 1; i >= 0; i-- {
		if ps[i].enqueue(n) {
			return true, false
		}
	}
	if !held {
		return false, false
	}
	if len(r.pending[sid]) >= maxPendingNotes {
		return true, true
	}
	r.pending[sid] = append(r.pending[sid], n)
	return true, false
}

// forget drops what waits for an ended connection.
func (r *postRoutes) forget(sid string) {
	r.mu.Lock()
	delete(r.pending, sid)
	r.mu.Unlock()
}

// deliver queues n for connection cs: through a POST of it when one can
// carry it, else on mcp-go's channel (its GET stream, or whichever of its
// streams reads first).
func (s *Server) deliver(cs server.ClientSession, n mcp.JSONRPCNotification) bool {
	sid := cs.SessionID()
	if _, streamable := cs.(server.SessionWithStreamableHTTPConfig); streamable && sid != "" {
		held := !s.streams.holdsGET(sid)
		if taken, dropped := s.posts.route(sid, n, held); taken {
			return !dropped
		}
	}
	select {
	case cs.NotificationChannel() <- n:
		return true
	default:
		return false
	}
}

// endPost ends a POST of connection sid; what reached its stream after
// its answer is delivered again, to another stream of the connection.
func (s *Server) endPost(sid string, p *postStream) {
	late := s.posts.end(sid, p)
	if len(late) == 0 {
		return
	}
	cs := s.conns.session(sid)
	if cs == nil {
		return // the connection ended meanwhile
	}
	for _, n := range late {
		if !s.deliver(cs, n) {
			s.log.Warn("notification dropped: the connection's queue is full", "conn", sid, "method", n.Method)
		}
	}
}
