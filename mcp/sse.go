package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/mcpswarm/mcpswarm/authz"
)

// sseWriter serialises writes to a legacy SSE stream so the front can
// inject events (a read denial's JSON-RPC error) between mcp-go's events,
// each of which mcp-go writes with a single Write.
type sseWriter struct {
	http.ResponseWriter
	mu     sync.Mutex
	closed bool
}

func (w *sseWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, errors.New("mcp: sse stream closed")
	}
	return w.ResponseWriter.Write(p)
}

// Flush flushes the stream.
func (w *sseWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if f, ok := w.ResponseWriter.(http.Flusher); ok && !w.closed {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *sseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *sseWriter) inject(data []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return errors.New("mcp: sse stream closed")
	}
	if _, err := fmt.Fprintf(w.ResponseWriter, "event: message\ndata: %s\n\n", data); err != nil {
		return fmt.Errorf("writing sse event: %w", err)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}

func (w *sseWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

// sseStreams tracks this node's legacy SSE streams and the Streamable HTTP
// GET streams it holds.
type sseStreams struct {
	mu   sync.Mutex
	sse  map[string]*sseWriter
	gets map[string]int
}

func newSSEStreams() *sseStreams {
	return &sseStreams{sse: make(map[string]*sseWriter), gets: make(map[string]int)}
}

func (t *sseStreams) put(id string, w *sseWriter) {
	t.mu.Lock()
	t.sse[id] = w
	t.mu.Unlock()
}

func (t *sseStreams) get(id string) (*sseWriter, bool) {
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
		w.close()
	}
}

type sseSlotKey struct{}

// sseSlot carries the id mcp-go's generator minted back to serveSSE.
type sseSlot struct{ id string }

// sseSessionID mints a sealed id for a legacy SSE connection, bound to the
// authenticated principal like a Streamable HTTP one.
func (s *Server) sseSessionID(ctx context.Context, r *http.Request) (string, error) {
	id := s.ids.Mint(boundSubject(r.Context()))
	if slot, ok := ctx.Value(sseSlotKey{}).(*sseSlot); ok {
		slot.id = id
	}
	return id, nil
}

func (s *Server) serveSSE(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "Method not allowed", http.StatusMethodNotAllowed)
		return
	}
	r, rq := ownRequest(r)
	rq.id.transport = authz.TransportSSE
	rq.id.prechecked = true
	slot := &sseSlot{}
	ctx := context.WithValue(r.Context(), sseSlotKey{}, slot)
	sw := &sseWriter{ResponseWriter: w}
	// The generator runs before mcp-go writes anything, so the stream is
	// registered before its endpoint event reaches the client.
	reg := &registeringWriter{sseWriter: sw, register: func() {
		if slot.id != "" {
			s.streams.put(slot.id, sw)
		}
	}}
	defer func() {
		sw.close()
		if slot.id != "" {
			s.streams.remove(slot.id)
		}
	}()
	s.sse.ServeHTTP(reg, r.WithContext(ctx))
}

// registeringWriter registers the stream on its first write.
type registeringWriter struct {
	*sseWriter
	once     sync.Once
	register func()
}

func (w *registeringWriter) Write(p []byte) (int, error) {
	w.once.Do(w.register)
	return w.sseWriter.Write(p)
}

func (w *registeringWriter) WriteHeader(code int) {
	w.once.Do(w.register)
	w.sseWriter.ResponseWriter.WriteHeader(code)
}

func (s *Server) serveSSEMessage(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeRPCError(w, http.StatusMethodNotAllowed, &rpcError{Code: codeInvalidRequest, Message: "method not allowed"})
		return
	}
	r, rq := ownRequest(r)
	rq.id.transport = authz.TransportSSE
	rq.id.prechecked = true
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
	rq.body, rq.env = body, env
	if _, here := s.streams.get(sid); !here && claims.Node != s.cfg.Node && s.relay != nil {
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
	e := sseEraError(env)
	if e == nil {
		e = s.precheckRead(r, env, authz.TransportSSE, sid, false)
	}
	if e != nil {
		stream, found := s.streams.get(sid)
		if !found {
			writeRPCError(w, http.StatusNotFound, &rpcError{Code: codeInvalidParams, Message: "no sse stream for this session on this node"})
			return
		}
		w.WriteHeader(http.StatusAccepted)
		if err := stream.inject(e.marshal()); err != nil {
			s.log.Debug("read denial not delivered", "conn", sid, "err", err)
		}
		return
	}
	s.sse.ServeHTTP(w, r)
}

// DeliverSSE serves a legacy SSE message that another node received for a
// stream this node holds (see Relay.ForwardSSE), as if it had been posted
// here by the stream's principal. It returns the HTTP status this node
// answered, refusals included; an error only when it could not serve it.
func (s *Server) DeliverSSE(ctx context.Context, connID string, body []byte) (int, error) {
	claims, err := s.ids.open(connID)
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
