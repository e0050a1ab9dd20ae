package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// postDrainInterval is how often notifications a handler queued are written
// to its POST stream while it still runs.
const postDrainInterval = 10 * time.Millisecond

// postStream wraps the response of one Streamable HTTP POST. Notifications
// a handler sends through its request's session (progress, log messages)
// are queued on a channel of this request alone and written to this
// response under the same lock as mcp-go's own writes, always before
// mcp-go's next write. So they reach the client on the call's own stream,
// before its result, and can neither be lost nor taken by another stream
// (mcp-go otherwise shares one channel between the POST and the GET stream
// and may answer before forwarding the last notifications).
type postStream struct {
	w http.ResponseWriter
	// node names this node in the ids of server-to-client requests
	// written here (see relayid.go).
	node string

	mu      sync.Mutex
	sources []chan mcp.JSONRPCNotification
	// queued holds backend notifications routed to this POST (postRoutes),
	// written before the sources' and before mcp-go's next write.
	queued      []mcp.JSONRPCNotification
	wroteHeader bool
	// sseByUs: drainLocked started the SSE response, so mcp-go may still
	// write its answer as plain JSON (it did not upgrade it itself).
	sseByUs  bool
	midEvent bool
	closed   bool
	stop     chan struct{}
	ticking  bool
	// hdr is the header mcp-go sets: its own goroutines write it under
	// mcp-go's lock while the tick may start the SSE response under ours,
	// so the real header is touched only under p.mu and hdr is copied
	// into it when mcp-go writes its status.
	hdr http.Header
}

func newPostStream(w http.ResponseWriter, node string) *postStream {
	return &postStream{w: w, node: node, stop: make(chan struct{}), hdr: make(http.Header)}
}

func postStreamFrom(ctx context.Context) *postStream {
	if r := requestFrom(ctx); r != nil {
		return r.post
	}
	return nil
}

// Header returns the header mcp-go's answer will carry.
func (p *postStream) Header() http.Header { return p.hdr }

// WriteHeader writes the status once (the stream may have started it).
// Notifications still queued go first: they make a successful answer an
// SSE stream, whose header must be the one written.
func (p *postStream) WriteHeader(code int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.wroteHeader && !p.midEvent && code == http.StatusOK {
		p.drainLocked()
	}
	if !p.wroteHeader {
		p.wroteHeader = true
		p.copyHeaderLocked()
		p.w.WriteHeader(code)
	}
}

// copyHeaderLocked moves what mcp-go set into the real header before the
// status goes out.
func (p *postStream) copyHeaderLocked() {
	h := p.w.Header()
	for k, v := range p.hdr {
		h[k] = v
	}
}

// Write writes mcp-go's bytes after any queued notification.
func (p *postStream) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.midEvent {
		p.drainLocked()
	}
	if !p.wroteHeader {
		p.copyHeaderLocked()
		p.wroteHeader = true
	}
	if p.sseByUs && p.hdr.Get("Content-Type") == "application/json" {
		// mcp-go answers in JSON (one Encode, one Write) on a response
		// this stream already made SSE: frame the answer as an event, or
		// the client reads a stream that never answers.
		if _, err := fmt.Fprintf(p.w, "event: message\ndata: %s\n\n", bytes.TrimRight(tagRequestIDs(b, p.node), "\n")); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	if _, err := p.w.Write(tagRequestIDs(b, p.node)); err != nil {
		return 0, err
	}
	p.midEvent = !bytes.HasSuffix(b, []byte("\n\n")) && p.sseLocked()
	return len(b), nil
}

// Flush flushes the response.
func (p *postStream) Flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.midEvent {
		p.drainLocked()
	}
	if f, ok := p.w.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (p *postStream) Unwrap() http.ResponseWriter { return p.w }

func (p *postStream) sseLocked() bool {
	return p.w.Header().Get("Content-Type") == "text/event-stream"
}

// send writes one server-to-client JSON-RPC message as an SSE event now
// (after any queued notification), starting the SSE response if needed.
func (p *postStream) send(msg []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("the request's stream has ended")
	}
	if p.midEvent {
		return errors.New("the request's stream is busy mid-event")
	}
	p.drainLocked()
	if p.closed {
		return errors.New("the request's stream has ended")
	}
	if !p.wroteHeader {
		p.startSSELocked()
	}
	if _, err := fmt.Fprintf(p.w, "event: message\ndata: %s\n\n", msg); err != nil {
		p.closed = true
		return fmt.Errorf("writing to the request's stream: %w", err)
	}
	if f, ok := p.w.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}

// startSSELocked starts the response as an SSE stream.
func (p *postStream) startSSELocked() {
	h := p.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	p.w.WriteHeader(http.StatusOK)
	p.wroteHeader = true
	p.sseByUs = true
}

// source returns a new notification channel for the request's session.
func (p *postStream) source() chan mcp.JSONRPCNotification {
	ch := make(chan mcp.JSONRPCNotification, 100)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sources = append(p.sources, ch)
	p.startTickLocked()
	return ch
}

// enqueue queues a backend notification for this POST; false once the
// stream has ended.
func (p *postStream) enqueue(n mcp.JSONRPCNotification) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.queued = append(p.queued, n)
	p.startTickLocked()
	return true
}

func (p *postStream) startTickLocked() {
	if !p.ticking && !p.closed {
		p.ticking = true
		go p.tick()
	}
}

func (p *postStream) tick() {
	t := time.NewTicker(postDrainInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			p.mu.Lock()
			if !p.closed && !p.midEvent {
				p.drainLocked()
			}
			p.mu.Unlock()
		case <-p.stop:
			return
		}
	}
}

// drainLocked writes every queued notification as an SSE event, starting
// the SSE response if nothing was written yet.
func (p *postStream) drainLocked() {
	if p.closed || (p.wroteHeader && !p.sseLocked()) {
		// A JSON answer has begun: an event now would corrupt it. What is
		// queued stays for close to hand on to another stream.
		return
	}
	wrote := false
	for len(p.queued) > 0 {
		if !p.writeNoteLocked(p.queued[0]) {
			return // kept in queued: close hands it on to another stream
		}
		p.queued = p.queued[1:]
		wrote = true
	}
	p.queued = nil
	for _, ch := range p.sources {
		for {
			var n mcp.JSONRPCNotification
			select {
			case n = <-ch:
			default:
			}
			if n.Method == "" {
				break
			}
			if !p.writeNoteLocked(n) {
				return
			}
			wrote = true
		}
	}
	if wrote {
		if f, ok := p.w.(http.Flusher); ok {
			f.Flush()
		}
	}
}

// writeNoteLocked writes n as an SSE event, starting the SSE response if
// nothing was written yet; false when the write failed, which ends the
// stream. A notification that cannot be encoded is skipped.
func (p *postStream) writeNoteLocked(n mcp.JSONRPCNotification) bool {
	data, err := json.Marshal(n)
	if err != nil {
		return true
	}
	if !p.wroteHeader {
		p.startSSELocked()
	}
	if _, err := fmt.Fprintf(p.w, "event: message\ndata: %s\n\n", data); err != nil {
		p.closed = true
		return false
	}
	return true
}

// close ends the stream: nothing is written after the handler returned.
// It returns the backend notifications queued but not written.
func (p *postStream) close() []mcp.JSONRPCNotification {
	p.mu.Lock()
	p.closed = true
	ticking := p.ticking
	late := p.queued
	p.queued = nil
	p.mu.Unlock()
	if ticking {
		close(p.stop)
	}
	return late
}
