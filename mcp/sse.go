package mcp

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/mcp/wire"
)

// sseStreams tracks this node's legacy SSE streams and the Streamable HTTP
// GET streams it holds.
type sseStreams struct {
	mu   sync.Mutex
	sse  map[string]*eventStream
	gets map[string]int
}

func newSSEStreams() *sseStreams {
	return &sseStreams{sse: make(map[string]*eventStream), gets: make(map[string]int)}
}

func (t *sseStreams) put(id string, w *eventStream) {
	t.mu.Lock()
	t.sse[id] = w
	t.mu.Unlock()
}

func (t *sseStreams) get(id string) (*eventStream, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w, ok := t.sse[id]
	return w, ok
}

func (t *sseStreams) remove(id string) {
	t.mu.Lock()
	delete(t.sse, id)
	t.mu.Unlock()
}

func (t *sseStreams) holdGET(id string) {
	t.mu.Lock()
	t.gets[id]++
	t.mu.Unlock()
}

func (t *sseStreams) releaseGET(id string) {
	t.mu.Lock()
	if t.gets[id]--; t.gets[id] <= 0 {
		delete(t.gets, id)
	}
	t.mu.Unlock()
}

func (t *sseStreams) holdsGET(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.gets[id] > 0
}

func (t *sseStreams) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, w := range t.sse {
		w.end()
	}
}

// maxSSECalls bounds the requests of one legacy SSE connection in flight:
// each POST is answered at once and its call runs on.
const maxSSECalls = 64

// serveSSE holds a legacy HTTP+SSE connection: it mints the connection's
// id, names the endpoint its messages go to, and carries every answer and
// server-initiated message of the connection until the client goes.
func (s *Server) serveSSE(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "Method not allowed", http.StatusMethodNotAllowed)
		return
	}
	id, _ := identityFrom(r.Context())
	id.transport = authz.TransportSSE
	sid := s.ids.Mint(boundSubject(r.Context()))
	stream := newEventStream(w)
	// The connection's calls end with its stream, and only so many run.
	stream.ctx, stream.calls = r.Context(), make(chan struct{}, maxSSECalls)
	defer stream.end()
	s.streams.put(sid, stream)
	defer s.streams.remove(sid)
	s.conns.add(sid, s.principal(id, sid, false), true, stream)
	defer s.forgetLocal(sid)
	if err := stream.event("endpoint", []byte("/message?sessionId="+url.QueryEscape(sid))); err != nil {
		return
	}
	s.holdStream(r.Context(), stream)
}

func (s *Server) serveSSEMessage(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeRPCError(w, http.StatusMethodNotAllowed, &rpcError{Code: codeInvalidRequest, Message: "method not allowed"})
		return
	}
	sid := r.URL.Query().Get("sessionId")
	claims, err := s.ids.Open(sid, boundSubject(r.Context()))
	if err != nil {
		s.metrics.rejected("session_id")
		writeRPCError(w, http.StatusNotFound, &rpcError{Code: codeInvalidParams, Message: "invalid session id"})
		return
	}
	if !s.canServe(w, sid) {
		return
	}
	if boundSubject(r.Context()) != "" {
		s.init.conns.touch(sid, time.Now())
	}
	body, env, ok := s.readBody(w, r)
	if !ok {
		return
	}
	if _, here := s.streams.get(sid); !here && claims.Node != s.cfg.Node {
		// The stream lives on the node that minted the id; a load
		// balancer sent the POST here. Hand it over rather than refuse it.
		code, err := s.relay.ForwardSSE(r.Context(), claims.Node, sid, body)
		if err != nil {
			s.log.Warn("forwarding an SSE message to its stream's node", "conn", sid, "node", claims.Node, "err", err)
			writeRPCError(w, http.StatusBadGateway, &rpcError{Code: codeInternal, Message: "the node holding this SSE stream is unreachable: " + claims.Node})
			return
		}
		w.WriteHeader(code)
		return
	}
	stream, found := s.streams.get(sid)
	if !found {
		writeRPCError(w, http.StatusNotFound, &rpcError{Code: codeInvalidParams, Message: "no sse stream for this session on this node"})
		return
	}
	if env.IsResponse() {
		w.WriteHeader(http.StatusAccepted)
		_, local, tagged := wire.ParseRelayID(env.ID)
		if !env.IsPingAnswer() && (!tagged || !s.asks.answer(sid, local, env)) {
			s.log.Debug("dropping an answer no request waits for", "conn", sid, "id", string(env.ID))
		}
		return
	}
	id, _ := identityFrom(r.Context())
	id.transport = authz.TransportSSE
	x := &exchange{env: env, body: body, id: id, conn: sid, versions: legacyVersions(),
		out: &streamOutbox{s: s, conn: sid, stream: stream}}
	x.c = authz.Context{ConnID: sid, Transport: authz.TransportSSE, Node: s.cfg.Node, Principal: s.principal(id, sid, false)}
	x.client, _ = s.registry.Get(sid)
	x.version = x.client.ProtocolVersion
	if e := sseEraError(env); e != nil {
		w.WriteHeader(http.StatusAccepted)
		_ = stream.send(e.marshal())
		return
	}
	if !env.IsRequest() {
		w.WriteHeader(http.StatusAccepted)
		_, _ = s.dispatch(stream.ctx, x)
		return
	}
	if env.Method == string(mcp.MethodServerDiscover) && x.readMeta() == nil {
		x.modern = true // a 2026-07-28 client asking what this transport serves
	}
	// The answer goes on the stream, whenever it is ready: the POST is
	// answered now, and the call lasts as long as the stream does.
	select {
	case stream.calls <- struct{}{}:
	default:
		writeRPCError(w, http.StatusTooManyRequests, &rpcError{ID: env.ID, Code: codeInvalidRequest,
			Message: fmt.Sprintf("more than %d requests of this connection in flight; wait for their answers", maxSSECalls)})
		return
	}
	w.WriteHeader(http.StatusAccepted)
	go func() {
		answer, _ := s.dispatch(stream.ctx, x)
		<-stream.calls // free before the client hears the answer
		if answer != nil {
			if err := stream.send(answer); err != nil {
				s.log.Debug("answer on a closed sse stream", "conn", sid, "err", err)
			}
		}
	}()
}

// DeliverSSE serves a legacy SSE message that another node received for a
// stream this node holds (see Relay.ForwardSSE), as if it had been posted
// here by the stream's principal. It returns the HTTP status this node
// answered, refusals included; an error only when it could not serve it.
func (s *Server) DeliverSSE(ctx context.Context, connID string, body []byte) (int, error) {
	claims, err := s.ids.Claims(connID)
	if err != nil {
		return http.StatusNotFound, fmt.Errorf("delivering a forwarded SSE message: %w", err)
	}
	id := identity{transport: authz.TransportSSE}
	if claims.Principal != "" {
		id.authed, id.principal = true, authz.Principal{Subject: claims.Principal, Authenticated: true}
	}
	req, err := http.NewRequestWithContext(withIdentity(ctx, id), http.MethodPost, "http://localhost/message?sessionId="+url.QueryEscape(connID), bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("delivering a forwarded SSE message: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	rec := &statusRecorder{header: http.Header{}, status: http.StatusOK}
	s.serveSSEMessage(rec, req)
	return rec.status, nil
}
