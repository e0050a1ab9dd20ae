package mcp

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/mcp/task"
	"github.com/mcpswarm/mcpswarm/mcp/wire"
)

// The Streamable HTTP transport at /mcp: POST carries every client
// message; GET holds a connection's stream of server-initiated messages;
// DELETE ends a connection. A 2026-07-28 request has no connection: its
// _meta declares the client, and subscriptions/listen is its stream.

func (s *Server) serveStreamable(w http.ResponseWriter, r *http.Request) {
	if !s.drain.Enter() {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "Service Unavailable: the node is shutting down", http.StatusServiceUnavailable)
		return
	}
	defer s.drain.Leave()
	id, _ := identityFrom(r.Context())
	id.transport = authz.TransportStreamableHTTP
	switch r.Method {
	case http.MethodPost:
		s.servePost(w, r, id)
	case http.MethodGet:
		s.serveGet(w, r, id)
	case http.MethodDelete:
		s.serveDelete(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "Method not allowed", http.StatusMethodNotAllowed)
	}
}

// refuseModernSessionMethod answers a 2026-07-28 GET or DELETE: that
// revision has no connections.
func refuseModernSessionMethod(w http.ResponseWriter, r *http.Request) bool {
	if !mcp.IsModernProtocol(r.Header.Get(headerProtocolVersion)) {
		return false
	}
	w.Header().Set("Allow", http.MethodPost)
	http.Error(w, r.Method+" is not supported in protocol version "+mcp.ProtocolVersion20260728+
		": server-to-client messages use subscriptions/listen", http.StatusMethodNotAllowed)
	return true
}

// refuseUnknownVersion answers a request whose Mcp-Protocol-Version names
// no revision.
func refuseUnknownVersion(w http.ResponseWriter, r *http.Request) bool {
	v := r.Header.Get(headerProtocolVersion)
	if v == "" || mcp.IsValidProtocolVersion(v) {
		return false
	}
	http.Error(w, "Unsupported protocol version: "+v, http.StatusBadRequest)
	return true
}

func (s *Server) servePost(w http.ResponseWriter, r *http.Request, id identity) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		http.Error(w, "Invalid content type: must be 'application/json'", http.StatusBadRequest)
		return
	}
	body, env, ok := s.readBody(w, r)
	if !ok {
		return
	}
	x := &exchange{env: env, body: body, id: id, header: r.Header, versions: s.versions}
	x.modern = modernRequest(r, env.Params)
	if x.modern {
		if e, status := s.checkModern(r, x); e != nil {
			writeRPCError(w, status, e)
			return
		}
	} else if env.Method != string(mcp.MethodInitialize) {
		if refuseUnknownVersion(w, r) {
			return
		}
		x.conn = r.Header.Get(headerSessionID)
		if !s.checkSessionID(w, r, x.conn) {
			return
		}
	}
	switch {
	case env.IsResponse():
		s.takeClientAnswer(w, r, x.conn, env, body)
		return
	case !env.IsRequest():
		if env.Method == string(mcp.MethodNotificationCancelled) && x.conn != "" {
			// The call it cancels may run on another node (a load
			// balancer sent that POST elsewhere): let every node try.
			go s.relay.ForwardCancel(context.WithoutCancel(r.Context()), x.conn, body)
		}
		_, _ = s.dispatch(r.Context(), x)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	s.serveCall(w, r, x)
}

// serveCall serves one request of a POST: its answer is JSON, or, once
// the handler wrote to its client, the last event of an SSE stream.
func (s *Server) serveCall(w http.ResponseWriter, r *http.Request, x *exchange) {
	initialize := x.env.Method == string(mcp.MethodInitialize)
	if initialize {
		x.conn = s.ids.Mint(boundSubject(r.Context()))
	}
	x.c = authz.Context{ConnID: x.conn, Transport: authz.TransportStreamableHTTP, Node: s.cfg.Node,
		Principal: s.principal(x.id, x.conn, x.modern)}
	if !x.modern && !initialize {
		x.client, _ = s.registry.Get(x.conn)
		x.version = x.client.ProtocolVersion
		if v := r.Header.Get(headerProtocolVersion); v != "" {
			x.version = v
		}
	}
	stream := newEventStream(w)
	x.out = &streamOutbox{s: s, conn: x.conn, stream: stream}
	if x.modern && x.env.Method == string(mcp.MethodSubscriptionsListen) {
		s.serveListen(r.Context(), x, stream)
		return
	}
	routed := x.conn != "" && !initialize
	if routed {
		for _, id := range s.conns.touch(x.conn, time.Now()) {
			s.posts.forget(id)
		}
		s.posts.begin(x.conn, stream)
	}
	answer, code := s.dispatch(r.Context(), x)
	if routed {
		s.posts.end(x.conn, stream)
	}
	if initialize && code == 0 {
		w.Header().Set(headerSessionID, x.conn)
		s.conns.add(x.conn, x.c.Principal, true, nil)
	}
	if r.Context().Err() != nil {
		stream.end()
		return // the client went away: nobody reads an answer
	}
	sse, err := stream.finish(answer)
	if err != nil {
		s.log.Debug("writing an answer", "conn", x.conn, "method", x.env.Method, "err", err)
	}
	if sse {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	status := http.StatusOK
	if x.modern {
		status = modernStatus(code)
	}
	w.WriteHeader(status)
	if _, err := w.Write(append(answer, '\n')); err != nil {
		s.log.Debug("writing an answer", "conn", x.conn, "method", x.env.Method, "err", err)
	}
}

// modernStatus is the HTTP status 2026-07-28 gives an answer with error
// code (0: a result): errors of the request itself carry 4xx, the rest 200.
func modernStatus(code int) int {
	switch code {
	case codeMethodNotFound:
		return http.StatusNotFound
	case mcp.HEADER_MISMATCH, mcp.MISSING_REQUIRED_CLIENT_CAPABILITY, mcp.UNSUPPORTED_PROTOCOL_VERSION,
		codeInvalidRequest, codeInvalidParams, codeParseError:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// checkModern applies 2026-07-28's rules to a POST: removed methods are
// not found; a request names its version in the header and in _meta,
// equal and served here, declares its client in _meta, and its Mcp-Method
// and Mcp-Name headers match its body; client responses do not exist.
func (s *Server) checkModern(r *http.Request, x *exchange) (*rpcError, int) {
	env := x.env
	header := r.Header.Get(headerProtocolVersion)
	switch {
	case env.IsRequest() && removedInModern[env.Method]:
		return removedMethodError(env), http.StatusNotFound
	case env.IsResponse():
		return &rpcError{ID: env.ID, Code: codeInvalidRequest, Message: "client-to-server responses are not supported in protocol version " +
			mcp.ProtocolVersion20260728 + ": server-initiated requests were replaced by multi round-trip requests"}, http.StatusBadRequest
	case !env.IsRequest():
		if !paramsAreObject(env.Params) {
			return &rpcError{Code: codeInvalidParams, Message: "a notification's params must be an object"}, http.StatusBadRequest
		}
		x.version = header
		return nil, 0
	case r.Header.Get(mcp.HeaderLastEventID) != "":
		return &rpcError{ID: env.ID, Code: mcp.HEADER_MISMATCH, Message: "Last-Event-ID is not supported in protocol version " +
			mcp.ProtocolVersion20260728 + ": streams are not resumable, re-issue the request with a new ID"}, http.StatusBadRequest
	case header == "":
		return &rpcError{ID: env.ID, Code: mcp.HEADER_MISMATCH, Message: headerProtocolVersion + " header is required for requests carrying " + mcp.MetaKeyProtocolVersion}, http.StatusBadRequest
	}
	if e := x.readMeta(); e != nil {
		return e, http.StatusBadRequest
	}
	if header != x.version {
		return &rpcError{ID: env.ID, Code: mcp.HEADER_MISMATCH, Message: headerProtocolVersion + " header " + header + " does not match request " + mcp.MetaKeyProtocolVersion + " " + x.version}, http.StatusBadRequest
	}
	if !mcp.IsValidProtocolVersion(x.version) {
		e := mcp.UnsupportedProtocolVersionError{Version: x.version, Supported: s.versions}
		return &rpcError{ID: env.ID, Code: mcp.UNSUPPORTED_PROTOCOL_VERSION, Message: e.Error(),
			Data: mcp.UnsupportedProtocolVersionData{Supported: s.versions, Requested: x.version}}, http.StatusBadRequest
	}
	if err := cmp.Or(mcp.ValidateStandardHeaders(r.Header.Get, x.version, mcp.MCPMethod(env.Method), env.Params),
		task.CheckNameHeader(r.Header.Get, env.Method, env.Params)); err != nil {
		return protocolError(env, err), http.StatusBadRequest
	}
	if tool := s.serverTool(env); tool != nil {
		// Arguments annotated x-mcp-header travel in headers too, and the
		// two must agree.
		lookup := func(name string) (string, bool) {
			v := r.Header.Values(name)
			if len(v) == 0 {
				return "", false
			}
			return v[0], true
		}
		if err := mcp.ValidateParamHeadersLookup(lookup, tool, env.Params); err != nil {
			return protocolError(env, err), http.StatusBadRequest
		}
	}
	if e := s.checkCapabilities(x); e != nil {
		return e, http.StatusBadRequest
	}
	return nil, 0
}

// readMeta takes a 2026-07-28 request's version and client from its _meta.
func (x *exchange) readMeta() *rpcError {
	var p struct {
		Meta *mcp.Meta `json:"_meta"`
	}
	_ = json.Unmarshal(x.env.Params, &p)
	x.version = p.Meta.ProtocolVersion()
	if x.version == "" {
		return &rpcError{ID: x.env.ID, Code: codeInvalidParams, Message: "missing or invalid _meta field " + mcp.MetaKeyProtocolVersion}
	}
	caps := p.Meta.ClientCapabilities()
	if caps == nil {
		return &rpcError{ID: x.env.ID, Code: codeInvalidParams, Message: "missing or invalid _meta field " + mcp.MetaKeyClientCapabilities}
	}
	x.client = ConnInfo{ProtocolVersion: x.version, Capabilities: *caps, LogLevel: p.Meta.LogLevel()}
	if info := p.Meta.ClientInfo(); info != nil {
		x.client.ClientInfo = *info
	}
	return nil
}

// protocolError is the JSON-RPC error for a protocol-level refusal.
func protocolError(env wire.Envelope, err error) *rpcError {
	var mismatch mcp.HeaderMismatchError
	if errors.As(err, &mismatch) {
		return &rpcError{ID: env.ID, Code: mcp.HEADER_MISMATCH, Message: mismatch.Error()}
	}
	var missing mcp.MissingRequiredClientCapabilityError
	if errors.As(err, &missing) {
		return &rpcError{ID: env.ID, Code: mcp.MISSING_REQUIRED_CLIENT_CAPABILITY, Message: missing.Error()}
	}
	return &rpcError{ID: env.ID, Code: codeInvalidParams, Message: err.Error()}
}

// streamOutbox is the way back to the client of a request served on an
// HTTP response: notifications and requests become events on it.
type streamOutbox struct {
	s      *Server
	conn   string
	stream *eventStream
}

func (o *streamOutbox) notify(n mcp.JSONRPCNotification) error {
	b, err := wire.AppendNotification(nil, n.Method, n.Params)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", n.Method, err)
	}
	return o.stream.send(b)
}

func (o *streamOutbox) ask(ctx context.Context, method string, params any) (json.RawMessage, error) {
	return o.s.asks.ask(ctx, o.stream, o.conn, method, params)
}

// takeClientAnswer takes a client's response to a server-to-client
// request: here when this node sent it, else where its relay id points.
// An answer nobody waits for any more is acknowledged and dropped: the
// official Go SDK fails the client's next call on a 4xx.
func (s *Server) takeClientAnswer(w http.ResponseWriter, r *http.Request, conn string, env wire.Envelope, body []byte) {
	if env.IsPingAnswer() {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	node, local, tagged := wire.ParseRelayID(env.ID)
	if tagged && node == s.cfg.Node || !tagged {
		if !tagged || !s.asks.answer(conn, local, env) {
			s.log.Debug("dropping an answer no request waits for", "conn", conn, "id", string(env.ID))
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	// The answer must reach the waiting call even if the client stops
	// waiting for this POST's 202.
	if _, err := s.relay.ForwardResponse(context.WithoutCancel(r.Context()), conn, body); err != nil {
		s.log.Warn("forwarding a client response failed", "conn", conn, "err", err)
		http.Error(w, "Failed to deliver response", http.StatusBadGateway)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

func (s *Server) serveGet(w http.ResponseWriter, r *http.Request, id identity) {
	if refuseModernSessionMethod(w, r) || refuseUnknownVersion(w, r) {
		return
	}
	sid := r.Header.Get(headerSessionID)
	if !s.checkSessionID(w, r, sid) {
		return
	}
	stream := newEventStream(w)
	defer stream.end()
	s.streams.holdGET(sid)
	s.registry.StreamChanged(sid, true)
	defer func() {
		s.streams.releaseGET(sid)
		if !s.streams.holdsGET(sid) {
			s.registry.StreamChanged(sid, false)
		}
	}()
	s.conns.add(sid, s.principal(id, sid, false), false, stream)
	defer s.conns.release(sid, stream)
	stream.start() // the client learns of the stream once this node holds it
	s.holdStream(r.Context(), stream)
}

// holdStream keeps a stream open until its client or the node goes,
// pinging the client every Config.Keepalive.
func (s *Server) holdStream(ctx context.Context, stream *eventStream) {
	tick := time.NewTicker(s.cfg.Keepalive)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			n := s.pings.Add(1)
			ping, _ := wire.AppendRequest(nil, wire.RelayID(s.cfg.Node, "p"+strconv.FormatInt(n, 10)), string(mcp.MethodPing), nil)
			if err := stream.send(ping); err != nil {
				return
			}
		case <-ctx.Done():
			return
		case <-s.closing:
			return
		}
	}
}

func (s *Server) serveDelete(w http.ResponseWriter, r *http.Request) {
	if refuseModernSessionMethod(w, r) || refuseUnknownVersion(w, r) {
		return
	}
	sid := r.Header.Get(headerSessionID)
	if !s.checkSessionID(w, r, sid) {
		return
	}
	s.ids.Terminate(sid)
	// In force on every node before the client hears it succeeded.
	s.registry.Delete(sid)
	s.forgetLocal(sid)
	w.WriteHeader(http.StatusOK)
}

// serveListen holds a 2026-07-28 subscriptions/listen stream: it
// acknowledges what it will deliver, then carries those notifications,
// tagged with the request's id, until the client goes.
func (s *Server) serveListen(ctx context.Context, x *exchange, stream *eventStream) {
	defer stream.end()
	var p mcp.SubscriptionsListenParams
	if e := decode(x, &p); e != nil {
		e.ID = x.env.ID
		_, _ = stream.finish(e.marshal())
		return
	}
	for _, uri := range p.Notifications.ResourceSubscriptions {
		if err := s.checkResourceAccess(x.c, uri); err != nil {
			e := &rpcError{ID: x.env.ID, Code: codeInvalidParams, Message: fmt.Sprintf("subscribing to %q: %v", uri, err)}
			_, _ = stream.finish(e.marshal())
			return
		}
	}
	subID, _ := wire.DecodeID(x.env.ID)
	allowed := p.Notifications
	allowed.PromptsListChanged = false
	key := "listen:" + strconv.FormatInt(s.pings.Add(1), 10)
	defer s.conns.remove(key)
	ack, _ := notification(string(mcp.MethodNotificationSubscriptionsAcknowledged),
		map[string]any{"notifications": allowed}, map[string]any{mcp.MetaKeySubscriptionID: subID})
	// Registered before the acknowledgement and under the stream's lock:
	// what happens once the client heard it reaches the stream, after it.
	if err := stream.sendAfter(ack, func() {
		if !allowed.IsEmpty() {
			s.conns.addListen(key, x.c.Principal, allowed, subID, stream)
		}
	}); err != nil {
		return
	}
	if !allowed.IsEmpty() {
		select {
		case <-ctx.Done():
			return
		case <-s.closing:
		}
	}
	res := &mcp.SubscriptionsListenResult{}
	res.EnsureResultMeta().SetSubscriptionID(subID)
	b, err := appendResult(nil, x.env.ID, s.decorate(res, x.env.Method))
	if err == nil {
		_, _ = stream.finish(b)
	}
}

// forgetLocal drops what this node holds for connection id.
func (s *Server) forgetLocal(id string) {
	s.conns.remove(id)
	s.posts.forget(id)
	s.init.conns.forget(id)
}

// paramsAreObject reports whether params are absent, null or an object.
func paramsAreObject(params json.RawMessage) bool {
	p := bytes.TrimLeft(params, " \t\r\n")
	return len(p) == 0 || p[0] == '{' || string(p) == "null"
}
