package session

import (
	"slices"
	"sync"
	"time"
)

// workers runs sessions' queues on goroutines kept for reuse. A session
// holds no goroutine while idle (one parked per session cost 2.2 KB of
// stack each, and most sessions are idle), yet a fresh goroutine per call
// grows its stack from the minimum to the depth of an update every time:
// copying it was a third of a call's CPU (BenchmarkCallThroughActor).
// A worker that finds no queue parks for up to linger, so under load calls
// run on stacks already grown; at most maxIdle park at once.
type workers struct {
	linger  time.Duration
	maxIdle int

	mu     sync.Mutex
	idle   []chan *actor // parked workers, each waiting for its next queue
	closed bool
}

// run drains a's queue on a parked worker, or on a new one when none is.
func (w *workers) run(a *actor) {
	w.mu.Lock()
	if n := len(w.idle); n > 0 {
		ch := w.idle[n-1]
		w.idle = w.idle[:n-1]
		w.mu.Unlock()
		ch <- a // buffered: the worker takes it when it wakes
		return
	}
	w.mu.Unlock()
	go w.work(a)
}

// work drains queues until it has parked for linger with nothing to do,
// finds the pool full, or the pool closes.
func (w *workers) work(a *actor) {
	ch := make(chan *actor, 1)
	var t *time.Timer
	for a != nil {
		a.drain()
		a = nil
		w.mu.Lock()
		if w.closed || len(w.idle) >= w.maxIdle {
			w.mu.Unlock()
			return
		}
		w.idle = append(w.idle, ch)
		w.mu.Unlock()
		if t == nil {
			t = time.NewTimer(w.linger)
		} else {
			t.Reset(w.linger)
		}
		select {
		case a = <-ch: // nil when the pool closes
		case <-t.C:
			w.mu.Lock()
			if i := slices.Index(w.idle, ch); i >= 0 {
				w.idle = slices.Delete(w.idle, i, i+1)
				w.mu.Unlock()
				return
			}
			w.mu.Unlock()
			a = <-ch // run took this worker just as it timed out: its queue is on the way
		}
		t.Stop()
	}
}

// close releases the parked workers; busy ones exit after their queue.
func (w *workers) close() {
	w.mu.Lock()
	idle := w.idle
	w.idle, w.closed = nil, true
	w.mu.Unlock()
	for _, ch := range idle {
		ch <- nil
	}
}
