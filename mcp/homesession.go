package mcp

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// homeSession stands in mcp-go's session registry for a Streamable HTTP
// connection initialized on this node, so that mcp-go does not keep its
// own session object for it: that object is 9.5 KB (a 100-slot
// notification channel and three 10-slot request channels), about 80% of
// what an idle connection cost a node (BenchmarkIdleConnectionOnANode).
// Every POST of the connection then runs on a per-request session, as
// POSTs on every other node of the swarm always did, and notifications
// reach it through postRoutes.
//
// A GET stream needs mcp-go's own session (it reads that session's
// channels): the front takes the stand-in out before mcp-go serves a GET
// (makeRoomForGET) and mcp-go registers its session in its place, which
// then lives, as before, until the connection ends.
type homeSession struct {
	id   string
	info mcp.Implementation
	caps mcp.ClientCapabilities

	// yielding is set while a GET replaces this stand-in: the unregister
	// hook then keeps the connection's state for the session that comes.
	yielding atomic.Bool

	// mu guards notes and orders the GETs that take the stand-in out.
	mu    sync.Mutex
	notes chan mcp.JSONRPCNotification // made on first use: most connections never need it
}

var (
	_ server.SessionWithStreamableHTTPConfig = (*homeSession)(nil)
	_ server.SessionWithClientInfo           = (*homeSession)(nil)
)

func newHomeSession(id string, info mcp.Implementation, caps mcp.ClientCapabilities) *homeSession {
	return &homeSession{id: id, info: info, caps: caps}
}

// SessionID implements server.ClientSession.
func (h *homeSession) SessionID() string { return h.id }

// Initialize implements server.ClientSession; the stand-in is made after
// initialize succeeded.
func (h *homeSession) Initialize() {}

// Initialized implements server.ClientSession.
func (h *homeSession) Initialized() bool { return true }

// NotificationChannel holds what reached the connection while no POST or
// GET of it could carry it here: only in the moment a GET takes the
// stand-in's place, after which handOver moves it to mcp-go's session.
func (h *homeSession) NotificationChannel() chan<- mcp.JSONRPCNotification {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.notes == nil {
		h.notes = make(chan mcp.JSONRPCNotification, maxPendingNotes)
	}
	return h.notes
}

// UpgradeToSSEWhenReceiveNotification marks the stand-in as a Streamable
// HTTP session (deliver routes those through postRoutes); a POST turns SSE
// by itself when it carries a notification.
func (h *homeSession) UpgradeToSSEWhenReceiveNotification() {}

// GetClientInfo implements server.SessionWithClientInfo.
func (h *homeSession) GetClientInfo() mcp.Implementation { return h.info }

// SetClientInfo implements server.SessionWithClientInfo; what initialize
// declared is fixed for the connection's life.
func (h *homeSession) SetClientInfo(mcp.Implementation) {}

// GetClientCapabilities implements server.SessionWithClientInfo.
func (h *homeSession) GetClientCapabilities() mcp.ClientCapabilities { return h.caps }

// SetClientCapabilities implements server.SessionWithClientInfo.
func (h *homeSession) SetClientCapabilities(mcp.ClientCapabilities) {}

// handOver moves what waits on the stand-in's channel to cs.
func (h *homeSession) handOver(cs server.ClientSession) {
	h.mu.Lock()
	ch := h.notes
	h.mu.Unlock()
	if ch == nil {
		return
	}
	for {
		select {
		case n := <-ch:
			select {
			case cs.NotificationChannel() <- n:
			default: // as full as mcp-go's own channel would have been
			}
		default:
			return
		}
	}
}

// standIn registers a stand-in for the Streamable HTTP connection that
// initialize just made on this node, before mcp-go registers its own
// session for it (it does not when one is registered already).
func (s *Server) standIn(ctx context.Context, cs server.ClientSession, req *mcp.InitializeRequest) {
	if _, streamable := cs.(server.SessionWithStreamableHTTPConfig); !streamable {
		return
	}
	_ = s.mcp.RegisterSession(ctx, newHomeSession(cs.SessionID(), req.Params.ClientInfo, req.Params.Capabilities))
}

// makeRoomForGET takes connection sid's stand-in out of mcp-go's registry
// so mcp-go can register its own session for the GET stream, and returns
// a function to run once mcp-go served the GET: it puts the stand-in back
// when mcp-go registered nothing (it refused the GET, or replayed a stream
// and ended).
func (s *Server) makeRoomForGET(ctx context.Context, sid string) func() {
	h, ok := s.conns.session(sid).(*homeSession)
	if !ok {
		return func() {}
	}
	// A second GET arriving meanwhile waits here until the stand-in is
	// out, so mcp-go never finds it registered (and refuses that GET).
	h.mu.Lock()
	first := !h.yielding.Load()
	if first {
		h.yielding.Store(true)
		s.mcp.UnregisterSession(ctx, sid) // its hook returns at once: yielding
	}
	h.mu.Unlock()
	if !first {
		return func() {}
	}
	return func() {
		h.yielding.Store(false)
		if s.conns.session(sid) == server.ClientSession(h) {
			_ = s.mcp.RegisterSession(ctx, h)
		}
	}
}
