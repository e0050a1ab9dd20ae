package mcp

import (
	"context"
	"slices"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpswarm/mcpswarm/authz"
)

// ConnInfo is what the cluster needs to know about a connection so any node
// can serve it: where it was initialised, who it acts for and what it
// declared (mcp-go keeps all of this only on the node that saw initialize).
type ConnInfo struct {
	ID              string
	Node            string // home node (the one that minted the id)
	Principal       string
	ProtocolVersion string
	ClientInfo      mcp.Implementation
	Capabilities    mcp.ClientCapabilities
	LogLevel        mcp.LoggingLevel
	Subscriptions   []string
}

// ConnRegistry stores ConnInfo cluster-wide (the swarm layer implements it
// over its replicated "conns" registry). Put and Delete must not block.
type ConnRegistry interface {
	Put(ConnInfo)
	Get(id string) (ConnInfo, bool)
	Delete(id string)
}

// MemoryConns is a single-node ConnRegistry.
type MemoryConns struct {
	mu sync.RWMutex
	m  map[string]ConnInfo
}

// NewMemoryConns returns an empty MemoryConns.
func NewMemoryConns() *MemoryConns { return &MemoryConns{m: make(map[string]ConnInfo)} }

// Put stores c.
func (r *MemoryConns) Put(c ConnInfo) {
	r.mu.Lock()
	r.m[c.ID] = c
	r.mu.Unlock()
}

// Get returns the connection id.
func (r *MemoryConns) Get(id string) (ConnInfo, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c, ok := r.m[id]
	return c, ok
}

// Delete forgets the connection id.
func (r *MemoryConns) Delete(id string) {
	r.mu.Lock()
	delete(r.m, id)
	r.mu.Unlock()
}

// updateConn applies fn to connection id's record, if there is a registry.
func (s *Server) updateConn(id string, fn func(*ConnInfo)) {
	if s.registry == nil || id == "" {
		return
	}
	c, ok := s.registry.Get(id)
	if !ok {
		c = ConnInfo{ID: id}
		if claims, err := s.ids.open(id); err == nil {
			c.Node, c.Principal = claims.Node, claims.Principal
		}
	}
	fn(&c)
	s.registry.Put(c)
}

func (s *Server) afterInitialize(ctx context.Context, _ any, req *mcp.InitializeRequest, res *mcp.InitializeResult) {
	cs := server.ClientSessionFromContext(ctx)
	if cs == nil || cs.SessionID() == "" {
		return
	}
	c := s.authzContext(ctx)
	s.updateConn(cs.SessionID(), func(ci *ConnInfo) {
		ci.Node, ci.Principal = s.cfg.Node, c.Principal.Subject
		ci.ProtocolVersion = res.ProtocolVersion
		ci.ClientInfo = req.Params.ClientInfo
		ci.Capabilities = req.Params.Capabilities
	})
	if c.Transport == authz.TransportStreamableHTTP {
		s.standIn(ctx, cs, req)
	}
}

func (s *Server) afterSetLevel(ctx context.Context, _ any, req *mcp.SetLevelRequest, _ *mcp.EmptyResult) {
	if cs := server.ClientSessionFromContext(ctx); cs != nil {
		s.updateConn(cs.SessionID(), func(ci *ConnInfo) { ci.LogLevel = req.Params.Level })
	}
}

func (s *Server) recordSubscription(id, uri string, on bool) {
	s.updateConn(id, func(ci *ConnInfo) {
		ci.Subscriptions = slices.DeleteFunc(ci.Subscriptions, func(u string) bool { return u == uri })
		if on {
			ci.Subscriptions = append(ci.Subscriptions, uri)
		}
	})
}

// applyConn gives a request's per-request mcp-go session what the
// connection's home node learnt at initialize: client capabilities (so an
// Ask can elicit here), client info and, away from home, the log level.
func (s *Server) applyConn(vs *viewSession) {
	if vs.SessionID() == "" {
		return
	}
	if vs.GetClientCapabilities().Elicitation != nil || vs.GetClientInfo().Name != "" {
		return // mcp-go's session of the connection has them
	}
	if h, ok := s.conns.session(vs.SessionID()).(*homeSession); ok {
		vs.SetClientInfo(h.info) // this node saw initialize
		vs.SetClientCapabilities(h.caps)
		return
	}
	if s.registry == nil {
		return
	}
	ci, ok := s.registry.Get(vs.SessionID())
	if !ok {
		return
	}
	vs.SetClientInfo(ci.ClientInfo)
	vs.SetClientCapabilities(ci.Capabilities)
	if ci.LogLevel != "" {
		vs.SetLogLevel(ci.LogLevel)
	}
}

// subscribedVia answers whether a connection subscribed to uri through any
// node, from the cluster's connection registry.
func subscribedVia(r ConnRegistry, connID, uri string) bool {
	if r == nil {
		return false
	}
	ci, ok := r.Get(connID)
	return ok && slices.Contains(ci.Subscriptions, uri)
}
