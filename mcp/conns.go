package mcp

import (
	"slices"

	"github.com/mark3labs/mcp-go/mcp"
)

// ConnInfo is what the cluster needs to know about a connection so any node
// can serve it: where it was initialised, who it acts for and what it
// declared (only the node that saw initialize learnt it from the client).
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

// updateConn applies fn to connection id's record in the registry.
func (s *Server) updateConn(id string, fn func(*ConnInfo)) {
	if id == "" {
		return
	}
	c, ok := s.registry.Get(id)
	if !ok {
		c = ConnInfo{ID: id}
		if claims, err := s.ids.Claims(id); err == nil {
			c.Node, c.Principal = claims.Node, claims.Principal
		}
	}
	fn(&c)
	s.registry.Put(c)
}

func (s *Server) recordSubscription(id, uri string, on bool) {
	s.updateConn(id, func(ci *ConnInfo) {
		ci.Subscriptions = slices.DeleteFunc(ci.Subscriptions, func(u string) bool { return u == uri })
		if on {
			ci.Subscriptions = append(ci.Subscriptions, uri)
		}
	})
}

// subscribedVia answers whether a connection subscribed to uri through any
// node, from the cluster's connection registry.
func subscribedVia(r ConnRegistry, connID, uri string) bool {
	ci, ok := r.Get(connID)
	return ok && slices.Contains(ci.Subscriptions, uri)
}
