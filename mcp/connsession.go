package mcp

import (
	"errors"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// errNotSupported answers a server-initiated request the wrapped session
// cannot carry.
var errNotSupported = errors.New("mcp: not supported by this transport")

// viewSession wraps the session mcp-go made for one request and gives it a
// private, per-request set of session tools: the caller's view, installed by
// the OnRequestInitialization hook with SetSessionTools. mcp-go keys its own
// per-session tool store by session id, which 2026-07-28 requests share (the
// empty id) and stdio lacks, so the wrapper is what keeps views apart.
//
// Every optional session interface mcp-go probes is forwarded to the
// wrapped session; TestViewSessionForwardsEveryMethod pins that.
type viewSession struct {
	server.ClientSession

	mu    sync.RWMutex
	tools map[string]Tool
	level mcp.LoggingLevel
	// resources, when set, is this request's view of session resources.
	resources    map[string]Resource
	resourcesSet bool
	// post, when set, is the POST response this request is answered on;
	// notifications sent through this session go there (see postStream).
	post  *postStream
	notes chan mcp.JSONRPCNotification
	// asks, with post, sends sampling and roots requests on the POST's
	// own stream (clientreq.go).
	asks *clientRequests
}

// NotificationChannel returns the request's own channel on a Streamable
// HTTP POST (the POST's stream turns SSE when it writes the first
// notification), else the wrapped session's.
func (v *viewSession) NotificationChannel() chan<- mcp.JSONRPCNotification {
	if v.post == nil {
		return v.ClientSession.NotificationChannel()
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.notes == nil {
		v.notes = v.post.source()
	}
	return v.notes
}

// setResources installs this request's view of session resources.
func (v *viewSession) setResources(r map[string]Resource) {
	v.mu.Lock()
	v.resources, v.resourcesSet = r, true
	v.mu.Unlock()
}

func newViewSession(inner server.ClientSession) *viewSession {
	return &viewSession{ClientSession: inner}
}

// GetSessionTools returns the view installed for this request.
func (v *viewSession) GetSessionTools() map[string]Tool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.tools
}

// SetSessionTools installs the view for this request.
func (v *viewSession) SetSessionTools(tools map[string]Tool) {
	v.mu.Lock()
	v.tools = tools
	v.mu.Unlock()
}

// SetLogLevel records the connection's log level.
func (v *viewSession) SetLogLevel(level mcp.LoggingLevel) {
	if l, ok := v.ClientSession.(server.SessionWithLogging); ok {
		l.SetLogLevel(level)
		return
	}
	v.mu.Lock()
	v.level = level
	v.mu.Unlock()
}

// GetLogLevel returns the connection's log level.
func (v *viewSession) GetLogLevel() mcp.LoggingLevel {
	if l, ok := v.ClientSession.(server.SessionWithLogging); ok {
		return l.GetLogLevel()
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.level == "" {
		return mcp.LoggingLevelError
	}
	return v.level
}

// GetSessionResources forwards to the wrapped session.
func (v *viewSession) GetSessionResources() map[string]Resource {
	v.mu.RLock()
	if v.resourcesSet {
		defer v.mu.RUnlock()
		return v.resources
	}
	v.mu.RUnlock()
	if r, ok := v.ClientSession.(server.SessionWithResources); ok {
		return r.GetSessionResources()
	}
	return nil
}

// SetSessionResources forwards to the wrapped session.
func (v *viewSession) SetSessionResources(resources map[string]Resource) {
	if r, ok := v.ClientSession.(server.SessionWithResources); ok {
		r.SetSessionResources(resources)
	}
}

// GetSessionResourceTemplates forwards to the wrapped session.
func (v *viewSession) GetSessionResourceTemplates() map[string]server.ServerResourceTemplate {
	if r, ok := v.ClientSession.(server.SessionWithResourceTemplates); ok {
		return r.GetSessionResourceTemplates()
	}
	return nil
}

// SetSessionResourceTemplates forwards to the wrapped session.
func (v *viewSession) SetSessionResourceTemplates(t map[string]server.ServerResourceTemplate) {
	if r, ok := v.ClientSession.(server.SessionWithResourceTemplates); ok {
		r.SetSessionResourceTemplates(t)
	}
}

// GetClientInfo forwards to the wrapped session.
func (v *viewSession) GetClientInfo() mcp.Implementation {
	if c, ok := v.ClientSession.(server.SessionWithClientInfo); ok {
		return c.GetClientInfo()
	}
	return mcp.Implementation{}
}

// SetClientInfo forwards to the wrapped session.
func (v *viewSession) SetClientInfo(info mcp.Implementation) {
	if c, ok := v.ClientSession.(server.SessionWithClientInfo); ok {
		c.SetClientInfo(info)
	}
}

// GetClientCapabilities forwards to the wrapped session.
func (v *viewSession) GetClientCapabilities() mcp.ClientCapabilities {
	if c, ok := v.ClientSession.(server.SessionWithClientInfo); ok {
		return c.GetClientCapabilities()
	}
	return mcp.ClientCapabilities{}
}

// SetClientCapabilities forwards to the wrapped session.
func (v *viewSession) SetClientCapabilities(caps mcp.ClientCapabilities) {
	if c, ok := v.ClientSession.(server.SessionWithClientInfo); ok {
		c.SetClientCapabilities(caps)
	}
}

// UpgradeToSSEWhenReceiveNotification forwards to the wrapped session,
// except on a Streamable HTTP POST: there the POST's own stream starts SSE
// when it first writes a notification or request and frames mcp-go's
// answer as an event after it (postStream.Write). Forwarding would set
// mcp-go's flag for good: every later answer on the connection would be an
// SSE stream, and with an event store configured mcp-go keeps each such
// stream, with its response writer and request, until the connection ends
// (~4 KB a call; TestLongLivedConnectionKeepsNothingPerCall).
func (v *viewSession) UpgradeToSSEWhenReceiveNotification() {
	if v.post != nil {
		return
	}
	if s, ok := v.ClientSession.(server.SessionWithStreamableHTTPConfig); ok {
		s.UpgradeToSSEWhenReceiveNotification()
	}
}

// SetSubscriptionFilter forwards to the wrapped session.
func (v *viewSession) SetSubscriptionFilter(f mcp.SubscriptionFilter) {
	if s, ok := v.ClientSession.(server.SessionWithSubscriptionFilter); ok {
		s.SetSubscriptionFilter(f)
	}
}

// SubscriptionFilter forwards to the wrapped session.
func (v *viewSession) SubscriptionFilter() (mcp.SubscriptionFilter, bool) {
	if s, ok := v.ClientSession.(server.SessionWithSubscriptionFilter); ok {
		return s.SubscriptionFilter()
	}
	return mcp.SubscriptionFilter{}, false
}

// ProtocolVersion forwards to the wrapped session.
func (v *viewSession) ProtocolVersion() string {
	if p, ok := v.ClientSession.(server.SessionWithProtocolVersion); ok {
		return p.ProtocolVersion()
	}
	return ""
}

// Interface guards.
var (
	_ server.SessionWithTools                = (*viewSession)(nil)
	_ server.SessionWithLogging              = (*viewSession)(nil)
	_ server.SessionWithResources            = (*viewSession)(nil)
	_ server.SessionWithResourceTemplates    = (*viewSession)(nil)
	_ server.SessionWithClientInfo           = (*viewSession)(nil)
	_ server.SessionWithElicitation          = (*viewSession)(nil)
	_ server.SessionWithSampling             = (*viewSession)(nil)
	_ server.SessionWithRoots                = (*viewSession)(nil)
	_ server.SessionWithStreamableHTTPConfig = (*viewSession)(nil)
	_ server.SessionWithSubscriptionFilter   = (*viewSession)(nil)
	_ server.SessionWithProtocolVersion      = (*viewSession)(nil)
)
