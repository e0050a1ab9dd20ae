package mcp

import (
	"context"
	"sync"
)

// requestDrain tracks the HTTP requests in flight, so Shutdown refuses new
// ones (503) and waits for those running.
type requestDrain struct {
	mu      sync.RWMutex
	closing bool
	wg      sync.WaitGroup
}

// enter reports whether a request may start; after true the caller must
// call leave when it is done.
func (d *requestDrain) enter() bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closing {
		return false
	}
	d.wg.Add(1)
	return true
}

func (d *requestDrain) leave() { d.wg.Done() }

// close refuses requests from now on and waits until those in flight have
// returned or ctx ends; it reports ctx's error when they did not all return.
func (d *requestDrain) close(ctx context.Context) error {
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
