package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// This file routes the notifications a request handler sends (progress, log
// messages) onto that request's own POST response stream, instead of the
// session's shared channel that mcp-go's standalone GET stream also drains.
// With only an event store, a progress notification the GET stream takes can
// reach the client after the POST's response, and the client drops it.
//
//  1. postStreams wraps every POST's ResponseWriter in a postStream (one
//     mutex for every write, a second WriteHeader ignored) and puts it in the
//     request context.
//  2. requestSessions (an HTTPContextFunc) replaces the request's session by a
//     requestSession whose NotificationChannel is private to the request; a
//     pump writes what arrives there to the postStream as SSE events.
//  3. The OnSuccess/OnError hooks, which mcp-go runs before it writes the
//     response, stop the pump and write what is left, so every notification
//     precedes the response.

type postStreamKey struct{}

// postStream is a POST's response writer shared by mcp-go and the pump.
type postStream struct {
	w       http.ResponseWriter
	mu      sync.Mutex
	started bool            // the status line has been written
	session *requestSession // set once the request's session is wrapped
}

func (p *postStream) Header() http.Header { return p.w.Header() }

// WriteHeader writes the status once; a later call (mcp-go answering after
// the pump upgraded the response to SSE) is ignored.
func (p *postStream) WriteHeader(code int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return
	}
	p.started = true
	p.w.WriteHeader(code)
}

func (p *postStream) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.started = true
	return p.w.Write(b)
}

// Flush implements http.Flusher, which mcp-go requires to stream.
func (p *postStream) Flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f, ok := p.w.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (p *postStream) Unwrap() http.ResponseWriter { return p.w }

// event writes n as an SSE event, upgrading the response first if needed.
func (p *postStream) event(n mcp.JSONRPCNotification) error {
	data, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", n.Method, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started {
		h := p.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("Connection", "keep-alive")
		p.w.WriteHeader(http.StatusOK)
		p.started = true
	}
	if _, err := fmt.Fprintf(p.w, "event: message\ndata: %s\n\n", data); err != nil {
		return fmt.Errorf("writing %s: %w", n.Method, err)
	}
	if f, ok := p.w.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}

// postStreams wraps POST response writers; after the request it stops the
// pump of a request whose hooks did not run (e.g. a notification POST).
func postStreams(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		ps := &postStream{w: w}
		next.ServeHTTP(ps, r.WithContext(context.WithValue(r.Context(), postStreamKey{}, ps)))
		ps.mu.Lock()
		rs := ps.session
		ps.mu.Unlock()
		if rs != nil {
			rs.finish()
		}
	})
}

// requestSessions returns the HTTPContextFunc that wraps the session of each
// POST in a requestSession.
func requestSessions(s *server.MCPServer) server.HTTPContextFunc {
	return func(ctx context.Context, _ *http.Request) context.Context {
		ps, ok := ctx.Value(postStreamKey{}).(*postStream)
		inner := server.ClientSessionFromContext(ctx)
		if !ok || inner == nil {
			return ctx
		}
		rs := newRequestSession(inner, ps)
		ps.mu.Lock()
		ps.session = rs
		ps.mu.Unlock()
		return s.WithContext(ctx, rs)
	}
}

// finishHooks flush the request's notifications before mcp-go writes its response.
func finishHooks(h *server.Hooks) {
	finish := func(ctx context.Context) {
		if rs, ok := server.ClientSessionFromContext(ctx).(*requestSession); ok {
			rs.finish()
		}
	}
	h.AddOnSuccess(func(ctx context.Context, _ any, _ mcp.MCPMethod, _ any, _ any) { finish(ctx) })
	h.AddOnError(func(ctx context.Context, _ any, _ mcp.MCPMethod, _ any, _ error) { finish(ctx) })
}

// requestSession is the session of one POST: notifications sent through it
// go to that POST's stream; everything else is the connection's session.
type requestSession struct {
	server.ClientSession
	out      *postStream
	ch       chan mcp.JSONRPCNotification
	stop     chan struct{}
	pumped   chan struct{}
	finished atomic.Bool
	once     sync.Once
}

func newRequestSession(inner server.ClientSession, out *postStream) *requestSession {
	rs := &requestSession{ClientSession: inner, out: out,
		ch: make(chan mcp.JSONRPCNotification, 100), stop: make(chan struct{}), pumped: make(chan struct{})}
	go rs.pump()
	return rs
}

func (rs *requestSession) pump() {
	defer close(rs.pumped)
	for {
		select {
		case n := <-rs.ch:
			_ = rs.out.event(n) // a write error means the client left
		case <-rs.stop:
			return
		}
	}
}

// finish stops the pump and writes whatever is still queued; later
// notifications go to the connection's channel.
func (rs *requestSession) finish() {
	rs.once.Do(func() {
		rs.finished.Store(true)
		close(rs.stop)
		<-rs.pumped
		for {
			select {
			case n := <-rs.ch:
				_ = rs.out.event(n)
			default:
				return
			}
		}
	})
}

// NotificationChannel is private to the request until it finishes.
func (rs *requestSession) NotificationChannel() chan<- mcp.JSONRPCNotification {
	if rs.finished.Load() {
		return rs.ClientSession.NotificationChannel()
	}
	return rs.ch
}

// The optional session interfaces the fixture's paths use are forwarded.

func (rs *requestSession) SetLogLevel(l mcp.LoggingLevel) {
	if s, ok := rs.ClientSession.(server.SessionWithLogging); ok {
		s.SetLogLevel(l)
	}
}

func (rs *requestSession) GetLogLevel() mcp.LoggingLevel {
	if s, ok := rs.ClientSession.(server.SessionWithLogging); ok {
		return s.GetLogLevel()
	}
	return mcp.LoggingLevelError
}

func (rs *requestSession) GetClientInfo() mcp.Implementation {
	if s, ok := rs.ClientSession.(server.SessionWithClientInfo); ok {
		return s.GetClientInfo()
	}
	return mcp.Implementation{}
}

func (rs *requestSession) SetClientInfo(i mcp.Implementation) {
	if s, ok := rs.ClientSession.(server.SessionWithClientInfo); ok {
		s.SetClientInfo(i)
	}
}

func (rs *requestSession) GetClientCapabilities() mcp.ClientCapabilities {
	if s, ok := rs.ClientSession.(server.SessionWithClientInfo); ok {
		return s.GetClientCapabilities()
	}
	return mcp.ClientCapabilities{}
}

func (rs *requestSession) SetClientCapabilities(c mcp.ClientCapabilities) {
	if s, ok := rs.ClientSession.(server.SessionWithClientInfo); ok {
		s.SetClientCapabilities(c)
	}
}

func (rs *requestSession) UpgradeToSSEWhenReceiveNotification() {
	if s, ok := rs.ClientSession.(server.SessionWithStreamableHTTPConfig); ok {
		s.UpgradeToSSEWhenReceiveNotification()
	}
}

func (rs *requestSession) RequestElicitation(ctx context.Context, r mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	s, ok := rs.ClientSession.(server.SessionWithElicitation)
	if !ok {
		return nil, server.ErrElicitationNotSupported
	}
	res, err := s.RequestElicitation(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("requesting elicitation: %w", err)
	}
	return res, nil
}

func (rs *requestSession) RequestSampling(ctx context.Context, r mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	s, ok := rs.ClientSession.(server.SessionWithSampling)
	if !ok {
		return nil, fmt.Errorf("requesting sampling: the %T session cannot carry it", rs.ClientSession)
	}
	res, err := s.RequestSampling(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("requesting sampling: %w", err)
	}
	return res, nil
}

var (
	_ server.SessionWithLogging              = (*requestSession)(nil)
	_ server.SessionWithClientInfo           = (*requestSession)(nil)
	_ server.SessionWithStreamableHTTPConfig = (*requestSession)(nil)
	_ server.SessionWithElicitation          = (*requestSession)(nil)
	_ server.SessionWithSampling             = (*requestSession)(nil)
)
