// Package inflight tracks what a node's MCP front has in flight: the
// requests a client's notifications/cancelled may name (Calls) and the
// HTTP requests Shutdown waits for (Drain).
package inflight

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
)

// Calls holds the cancel function of each request in flight, so a
// client's notifications/cancelled — on this node's front or relayed from
// another node's — cancels it. A request is known by its connection and
// its id as fmt prints the id's decoded JSON value. The zero Calls is
// ready to use.
type Calls struct {
	mu sync.Mutex
	m  map[key]context.CancelFunc
}

type key struct{ conn, id string }

// idKey prints a decoded JSON-RPC id as fmt's %v does, without fmt for
// the two kinds an id has.
func idKey(id any) string {
	switch v := id.(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	default:
		return fmt.Sprint(v)
	}
}

// Start returns ctx with a cancel function registered for conn's request
// id, and done, which unregisters it.
func (c *Calls) Start(ctx context.Context, conn string, id any) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	k := key{conn, idKey(id)}
	c.mu.Lock()
	if c.m == nil {
		c.m = make(map[key]context.CancelFunc)
	}
	c.m[k] = cancel
	c.mu.Unlock()
	return ctx, func() {
		c.mu.Lock()
		delete(c.m, k)
		c.mu.Unlock()
		cancel()
	}
}

// Cancel cancels the request a notifications/cancelled of connection conn
// names in params, if it runs here.
func (c *Calls) Cancel(conn string, params json.RawMessage) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil || p.RequestID == nil {
		return
	}
	k := key{conn, idKey(p.RequestID)}
	c.mu.Lock()
	f, ok := c.m[k]
	delete(c.m, k)
	c.mu.Unlock()
	if ok {
		f()
	}
}

// Drain tracks the HTTP requests in flight, so Shutdown refuses new ones
// (503) and waits for those running. The zero Drain is open.
type Drain struct {
	mu      sync.RWMutex
	closing bool
	wg      sync.WaitGroup
}

// Enter reports whether a request may start; after true the caller must
// call Leave when it is done.
func (d *Drain) Enter() bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closing {
		return false
	}
	d.wg.Add(1)
	return true
}

// Leave ends a request Enter let in.
func (d *Drain) Leave() { d.wg.Done() }

// Close refuses requests from now on and waits until those in flight have
// returned or ctx ends; it reports ctx's error when they did not all return.
func (d *Drain) Close(ctx context.Context) error {
	d.mu.Lock()
	d.closing = true
	d.mu.Unlock()
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
