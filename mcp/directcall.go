package mcp

import (
	"context"
	"encoding/json"
	"hash/maphash"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// A tools/call on an established Streamable HTTP connection is the hot
// path of every agent. mcp-go's transport spends a fifth of such a call's
// CPU around its JSON-RPC core (issue #17's profile, docs/bench): it
// decodes the body twice more, makes a per-request session with four
// channels (9 KB), starts a notification forwarder goroutine and parks a
// request-scoped channel for server requests. On this front none of that
// carries anything: the request's postStream already takes its
// notifications and server requests (viewSession), and the front already
// checked the body, the session id and the protocol version. So the front
// hands such a call straight to mcp-go's JSON-RPC core (HandleMessage:
// hooks, tool lookup, middleware, handler, result) and writes the answer
// as the transport would have.
//
// Everything else — initialize, notifications, responses, other methods,
// 2026-07-28 requests, a connection whose GET stream mcp-go serves on this
// node (its session then carries state of its own), tools added through
// Config.Extend (their handlers may read the request's HTTP headers, which
// only mcp-go's transport hands on) — still goes through mcp-go's
// transport, unchanged.

// directCall serves r directly when it is such a call and reports whether
// it did; when it reports false nothing was written.
func (s *Server) directCall(w *postStream, r *http.Request, rq *request) bool {
	if !s.canCallDirect(r, rq) {
		return false
	}
	now := time.Now()
	if !s.touched.fresh(rq.checkedSID, now) {
		// mcp-go forgets a connection's node-local state (and this node's
		// stand-in for it) once its transport saw no request for the idle
		// TTL: let the transport serve one call per touch window so that
		// clock runs as it would without the direct path.
		s.touched.mark(rq.checkedSID, now)
		return false
	}
	s.metrics.direct.Inc()
	inner := &directSession{id: rq.checkedSID, registry: s.registry}
	ctx := s.mcp.WithContext(r.Context(), inner)
	ctx = server.WithSupportedProtocolVersions(ctx, s.versions)
	ctx = s.wrapContext(ctx, r)
	resp, ok := s.callTool(ctx, rq)
	if !ok {
		resp = s.mcp.HandleMessage(ctx, rq.body)
	}
	if ctx.Err() != nil {
		return true // the client went away: no answer, as from mcp-go's transport
	}
	if resp == nil { // a request always has one; answered as the transport would
		w.WriteHeader(http.StatusAccepted)
		return true
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	var err error
	if b, ok := toolAnswer(resp); ok {
		_, err = w.Write(b) // one write, as the encoder's
	} else {
		err = json.NewEncoder(w).Encode(resp)
	}
	if err != nil {
		s.log.Debug("writing a tool call's answer", "conn", rq.checkedSID, "err", err)
	}
	return true
}

// toolAnswer is resp encoded by appendToolAnswer, when it can.
func toolAnswer(resp mcp.JSONRPCMessage) ([]byte, bool) {
	r, ok := resp.(mcp.JSONRPCResponse)
	if !ok {
		return nil, false
	}
	res, ok := r.Result.(*mcp.CallToolResult)
	if !ok || r.JSONRPC != mcp.JSONRPC_VERSION {
		return nil, false
	}
	return appendToolAnswer(make([]byte, 0, 256), r.ID.Value(), res)
}

// canCallDirect reports whether r is a tools/call the front may serve
// without mcp-go's transport (see directCall).
func (s *Server) canCallDirect(r *http.Request, rq *request) bool {
	if s.registry == nil || rq.checkedSID == "" || rq.body == nil ||
		!rq.env.isRequest() || rq.env.Method != string(mcp.MethodToolsCall) {
		return false
	}
	if r.Header.Get("Content-Type") != "application/json" {
		return false // mcp-go parses and refuses other media types itself
	}
	switch r.Header.Get(headerProtocolVersion) {
	case mcp.ProtocolVersion20251125, mcp.ProtocolVersion20250618, mcp.ProtocolVersion20250326, mcp.ProtocolVersion20241105:
	default:
		return false // absent, unsupported, or 2026-07-28: mcp-go's rules
	}
	if cs := s.conns.session(rq.checkedSID); cs != nil {
		if _, standIn := cs.(*homeSession); !standIn {
			return false // mcp-go serves a GET of it here: its session has state
		}
	}
	name, ok := callToolName(rq.env.Params)
	if !ok || name == "" {
		return false
	}
	rq.tool = name
	if _, ok := s.static[name]; ok {
		return true
	}
	// A session's tool; a tool added through Extend is a server-wide
	// tool of mcp-go's, whatever its name.
	_, derived := splitDerived(name)
	return derived && !s.extendedTool(name)
}

// directSession is the per-request session of a direct call, in place of
// the one mcp-go's transport makes for each POST, with the same optional
// interfaces where a tool call reaches them: no channels; the log level it
// reports is the connection's, from the cluster's connection registry
// (which logging/setLevel writes on any node); client info and
// capabilities start empty and are what the front installs (applyConn);
// server-to-client requests go on the call's own stream (viewSession), so
// its own methods for them only refuse.
type directSession struct {
	id       string
	registry ConnRegistry

	mu    sync.Mutex
	level mcp.LoggingLevel
	notes chan mcp.JSONRPCNotification
	info  mcp.Implementation
	caps  mcp.ClientCapabilities
}

var (
	_ server.SessionWithLogging     = (*directSession)(nil)
	_ server.SessionWithClientInfo  = (*directSession)(nil)
	_ server.SessionWithElicitation = (*directSession)(nil)
	_ server.SessionWithSampling    = (*directSession)(nil)
	_ server.SessionWithRoots       = (*directSession)(nil)
)

// SessionID implements server.ClientSession.
func (d *directSession) SessionID() string { return d.id }

// Initialize implements server.ClientSession.
func (d *directSession) Initialize() {}

// Initialized implements server.ClientSession: the connection initialized
// before its id was accepted.
func (d *directSession) Initialized() bool { return true }

// NotificationChannel implements server.ClientSession. The request's view
// session sends notifications to its POST's stream instead; this channel
// exists so a stray send cannot block, and nothing reads it.
func (d *directSession) NotificationChannel() chan<- mcp.JSONRPCNotification {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.notes == nil {
		d.notes = make(chan mcp.JSONRPCNotification, 1)
	}
	return d.notes
}

// SetLogLevel implements server.SessionWithLogging for this request.
func (d *directSession) SetLogLevel(level mcp.LoggingLevel) {
	d.mu.Lock()
	d.level = level
	d.mu.Unlock()
}

// GetLogLevel implements server.SessionWithLogging: the level the
// connection set, else mcp-go's default (error).
func (d *directSession) GetLogLevel() mcp.LoggingLevel {
	d.mu.Lock()
	level := d.level
	d.mu.Unlock()
	if level != "" {
		return level
	}
	if c, ok := d.registry.Get(d.id); ok && c.LogLevel != "" {
		return c.LogLevel
	}
	return mcp.LoggingLevelError
}

// GetClientInfo implements server.SessionWithClientInfo.
func (d *directSession) GetClientInfo() mcp.Implementation {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.info
}

// SetClientInfo implements server.SessionWithClientInfo.
func (d *directSession) SetClientInfo(info mcp.Implementation) {
	d.mu.Lock()
	d.info = info
	d.mu.Unlock()
}

// GetClientCapabilities implements server.SessionWithClientInfo.
func (d *directSession) GetClientCapabilities() mcp.ClientCapabilities {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.caps
}

// SetClientCapabilities implements server.SessionWithClientInfo.
func (d *directSession) SetClientCapabilities(caps mcp.ClientCapabilities) {
	d.mu.Lock()
	d.caps = caps
	d.mu.Unlock()
}

// RequestElicitation implements server.SessionWithElicitation; the view
// session sends it on the call's stream instead.
func (d *directSession) RequestElicitation(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return nil, errNotSupported
}

// RequestSampling implements server.SessionWithSampling; see
// RequestElicitation.
func (d *directSession) RequestSampling(context.Context, mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	return nil, errNotSupported
}

// ListRoots implements server.SessionWithRoots; see RequestElicitation.
func (d *directSession) ListRoots(context.Context, mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	return nil, errNotSupported
}

// touchClock remembers when mcp-go's transport last served a call of each
// connection on this node, so the direct path leaves it one call per
// window and mcp-go's idle clock keeps running (see directCall). Entries
// older than the window are pruned as the map grows: a connection that
// stopped calling costs nothing after a window. A connection is keyed by
// a seeded 64-bit hash of its id and its time kept as nanoseconds, 16
// bytes an entry instead of the ~105-byte id and a time.Time: two ids
// sharing a hash (odds 2^-64 a pair, with a seed a client cannot learn)
// would only share a window.
type touchClock struct {
	window int64 // nanoseconds
	seed   maphash.Seed

	mu      sync.RWMutex // read-locked by every direct call's fresh
	last    map[uint64]int64
	pruneAt int
}

// minTouchPrune is the size below which the clock is never pruned.
const minTouchPrune = 1024

func newTouchClock(window time.Duration) *touchClock {
	return &touchClock{window: int64(window), seed: maphash.MakeSeed(), last: map[uint64]int64{}, pruneAt: minTouchPrune}
}

func (c *touchClock) key(id string) uint64 { return maphash.String(c.seed, id) }

// fresh reports whether the transport served connection id within the
// window before now.
func (c *touchClock) fresh(id string, now time.Time) bool {
	k := c.key(id)
	c.mu.RLock()
	at, ok := c.last[k]
	c.mu.RUnlock()
	return ok && now.UnixNano()-at < c.window
}

// mark records that the transport serves connection id at now.
func (c *touchClock) mark(id string, now time.Time) {
	k, t := c.key(id), now.UnixNano()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last[k] = t
	if len(c.last) < c.pruneAt {
		return
	}
	for k, at := range c.last {
		if t-at >= c.window {
			delete(c.last, k)
		}
	}
	c.pruneAt = max(minTouchPrune, 2*len(c.last))
}

// forget drops connection id (it ended).
func (c *touchClock) forget(id string) {
	k := c.key(id)
	c.mu.Lock()
	delete(c.last, k)
	c.mu.Unlock()
}

// size is the number of connections remembered.
func (c *touchClock) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.last)
}
