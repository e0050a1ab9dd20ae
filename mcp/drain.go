package mcp

import (
	"context"
	"sync"
	"time"
)

// requestDrain tracks the Streamable HTTP requests in flight so Shutdown
// can finish what mcp-go's leaves open. mcp-go's Shutdown closes the
// sessions it sees once; a GET that registers its session a moment later
// keeps a session-scoped listening pump (a goroutine) running for ever, and
// its handler waits on a stream nobody will close.
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

// close refuses requests from now on and calls sweep every few
// milliseconds until those in flight have returned (sweep closes the
// sessions they may have registered since the last one) or ctx ends. It
// reports ctx's error when the requests did not all return.
func (d *requestDrain) close(ctx context.Context, sweep func()) error {
	d.mu.Lock()
	d.closing = true
	d.mu.Unlock()
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		sweep()
		select {
		case <-done:
			sweep() // a session registered by the last request to return
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
