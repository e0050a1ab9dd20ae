package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mcpswarm/mcpswarm/mcp/wire"
)

// sink is where this node can write a connection's server-initiated
// messages: a GET or listen stream, a legacy SSE stream, a running POST,
// stdout.
type sink interface {
	// send writes one JSON-RPC message now.
	send(msg []byte) error
	// enqueue queues one for writing without waiting (a backend event
	// must not wait for a slow client); false when the stream ended or
	// maxQueued wait already.
	enqueue(msg []byte) bool
}

// maxQueued bounds the messages waiting for one stream (mcp-go's
// per-connection channel held 100).
const maxQueued = 100

// errStreamEnded refuses a write to a stream whose response has ended.
var errStreamEnded = errors.New("mcp: the stream has ended")

// eventStream is one HTTP response carrying JSON-RPC messages as SSE
// events: a Streamable HTTP GET, a 2026-07-28 listen, a legacy SSE stream,
// or a POST whose handler wrote to its client before answering. Writes are
// serialised; the response turns text/event-stream on the first one.
type eventStream struct {
	// ctx and calls serve a legacy SSE stream only: the calls of its
	// connection run in ctx, at most cap(calls) at once.
	ctx   context.Context
	calls chan struct{}

	mu       sync.Mutex
	w        http.ResponseWriter
	started  bool
	ended    bool
	queued   [][]byte
	draining bool
}

func newEventStream(w http.ResponseWriter) *eventStream { return &eventStream{w: w} }

// start writes the SSE header now (a GET announces its stream at once).
func (e *eventStream) start() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.startLocked()
	e.flushLocked()
}

func (e *eventStream) startLocked() {
	if e.started {
		return
	}
	h := e.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	e.w.WriteHeader(http.StatusOK)
	e.started = true
}

func (e *eventStream) flushLocked() {
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
}

// send writes msg as one "message" event.
func (e *eventStream) send(msg []byte) error {
	return e.event("message", msg)
}

// sendAfter runs fn, then writes msg, before anything else can be written
// or queued on the stream.
func (e *eventStream) sendAfter(msg []byte, fn func()) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	fn()
	if e.ended {
		return errStreamEnded
	}
	e.writeQueuedLocked()
	if err := e.writeLocked("message", msg); err != nil {
		return err
	}
	e.flushLocked()
	return nil
}

// event writes one SSE event named name, after what is queued.
func (e *eventStream) event(name string, data []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended {
		return errStreamEnded
	}
	e.writeQueuedLocked()
	if err := e.writeLocked(name, data); err != nil {
		return err
	}
	e.flushLocked()
	return nil
}

func (e *eventStream) writeLocked(name string, data []byte) error {
	e.startLocked()
	if _, err := fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", name, data); err != nil {
		e.ended = true
		return fmt.Errorf("writing to the client's stream: %w", err)
	}
	return nil
}

func (e *eventStream) writeQueuedLocked() {
	for len(e.queued) > 0 && !e.ended {
		msg := e.queued[0]
		e.queued = e.queued[1:]
		_ = e.writeLocked("message", msg)
	}
	e.queued = nil
}

// enqueue queues msg; a goroutine writes it.
func (e *eventStream) enqueue(msg []byte) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended || len(e.queued) >= maxQueued {
		return false
	}
	e.queued = append(e.queued, msg)
	if !e.draining {
		e.draining = true
		go e.drain()
	}
	return true
}

func (e *eventStream) drain() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.draining = false
	if e.ended {
		return // the handler returned: the response is no longer ours
	}
	e.writeQueuedLocked()
	e.flushLocked()
}

// end refuses every later write: the handler that owns the response
// returned. What is still queued is dropped.
func (e *eventStream) end() {
	e.mu.Lock()
	e.ended = true
	e.queued = nil
	e.mu.Unlock()
}

// finish ends the stream with a request's answer: as a last event when
// the response turned SSE (after what is queued), else not at all — the
// caller writes it as JSON; sse says which.
func (e *eventStream) finish(answer []byte) (sse bool, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.queued) > 0 {
		e.writeQueuedLocked()
	}
	sse = e.started
	if sse && !e.ended {
		// Not flushed: the answer goes out with the response's end, in
		// one write, so a client that stops reading at its answer still
		// finds the body ended and keeps the connection.
		err = e.writeLocked("message", answer)
	}
	e.ended = true
	return sse, err
}

// notification encodes a notification with its _meta.
func notification(method string, params, meta map[string]any) ([]byte, error) {
	return wire.AppendNotification(nil, method, mcp.NotificationParams{Meta: meta, AdditionalFields: params})
}
