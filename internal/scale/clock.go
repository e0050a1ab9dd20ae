package scale

import (
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// pausableClock is a node's clock in the harness: it follows wall time,
// less the spells it was paused, and while paused it stands still and
// none of its timers fire, so the phases that need the cluster's timers
// quiet (bytes per write, CPU with the clock frozen) can stop them.
//
// Its timers are the runtime's (time.AfterFunc): arming or resetting one
// costs O(log T) as on a real node. clockwork's FakeClock, which the
// harness moved forward in 10 ms steps before, sorts all of a clock's
// timers on every reset and fires them under one lock; a node resets a
// timer per message on each of its 2(N−1) streams, so at N = 64 one
// Advance of the 64 clocks took up to 2 s on 2 cores, every timer of a
// node fired that late, and streams were cut as stalled by the hundred:
// the harness's cost, not the design's, and it grew as N² log N.
type pausableClock struct {
	mu      sync.RWMutex
	paused  bool
	at      time.Time     // the time while paused
	offset  time.Duration // running: the time is wall time less offset
	waiters map[*waiter]struct{}
}

var _ clockwork.Clock = (*pausableClock)(nil)

// newPausableClock returns a clock reading wall time, paused.
func newPausableClock() *pausableClock {
	return &pausableClock{paused: true, at: time.Now(), waiters: map[*waiter]struct{}{}}
}

// Now is wall time less the paused spells, or the time it was paused at.
func (c *pausableClock) Now() time.Time {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.nowLocked()
}

func (c *pausableClock) nowLocked() time.Time {
	if c.paused {
		return c.at
	}
	return time.Now().Add(-c.offset)
}

func (c *pausableClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c *pausableClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }
func (c *pausableClock) After(d time.Duration) <-chan time.Time {
	return c.NewTimer(d).Chan()
}
func (c *pausableClock) Sleep(d time.Duration) { <-c.After(d) }

func (c *pausableClock) NewTimer(d time.Duration) clockwork.Timer {
	w := &waiter{c: c, ch: make(chan time.Time, 1)}
	w.Reset(d)
	return w
}

func (c *pausableClock) AfterFunc(d time.Duration, fn func()) clockwork.Timer {
	w := &waiter{c: c, fn: fn}
	w.Reset(d)
	return w
}

func (c *pausableClock) NewTicker(d time.Duration) clockwork.Ticker {
	if d <= 0 {
		panic("scale: non-positive ticker period")
	}
	w := &waiter{c: c, ch: make(chan time.Time, 1), period: d}
	w.arm(d)
	return ticker{w}
}

// pause stops the clock: no timer fires until resume.
func (c *pausableClock) pause() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paused {
		return
	}
	c.at, c.paused = c.nowLocked(), true
	for w := range c.waiters {
		w.stopReal()
	}
}

// resume starts the clock again from where it stood.
func (c *pausableClock) resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.paused {
		return
	}
	c.offset, c.paused = time.Since(c.at), false
	for w := range c.waiters {
		w.startReal(w.deadline.Sub(c.at))
	}
}

// waiter is a timer, an AfterFunc or a ticker (period > 0) of a
// pausableClock. Its fields are guarded by the clock's lock.
type waiter struct {
	c        *pausableClock
	ch       chan time.Time // nil for an AfterFunc
	fn       func()
	period   time.Duration
	deadline time.Time
	armed    bool
	real     *time.Timer // while armed and the clock runs
	gen      uint64      // a firing of an older real timer is void
}

// arm sets the waiter to fire d from now. The caller must not hold the
// clock's lock.
func (w *waiter) arm(d time.Duration) bool {
	c := w.c
	c.mu.Lock()
	was := w.disarmLocked()
	if w.ch != nil {
		// As a Go 1.23 timer: nothing stale is read after a reset.
		select {
		case <-w.ch:
		default:
		}
	}
	if d <= 0 && w.period == 0 {
		// Due at once, paused or not (as clockwork's timers).
		now := c.nowLocked()
		c.mu.Unlock()
		if w.fn != nil {
			go w.fn() // never on the caller's goroutine, as time.AfterFunc
		} else {
			w.deliver(now)
		}
		return was
	}
	w.deadline, w.armed = c.nowLocked().Add(d), true
	c.waiters[w] = struct{}{}
	if !c.paused {
		w.startReal(d)
	}
	c.mu.Unlock()
	return was
}

// disarmLocked stops the waiter; it reports whether it was armed.
func (w *waiter) disarmLocked() bool {
	was := w.armed
	w.armed = false
	w.stopReal()
	delete(w.c.waiters, w)
	return was
}

func (w *waiter) startReal(d time.Duration) {
	w.gen++
	gen := w.gen
	w.real = time.AfterFunc(max(d, 0), func() { w.fire(gen) })
}

func (w *waiter) stopReal() {
	w.gen++
	if w.real != nil {
		w.real.Stop()
		w.real = nil
	}
}

// fire runs when the real timer of generation gen expires.
func (w *waiter) fire(gen uint64) {
	c := w.c
	c.mu.Lock()
	if gen != w.gen || !w.armed || c.paused {
		c.mu.Unlock()
		return
	}
	now := c.nowLocked()
	w.real = nil
	if w.period > 0 {
		// Ticks the receiver has not kept up with are dropped, as a
		// time.Ticker's.
		w.deadline = w.deadline.Add(w.period)
		if !w.deadline.After(now) {
			w.deadline = now.Add(w.period)
		}
		w.startReal(w.deadline.Sub(now))
	} else {
		w.armed = false
		delete(c.waiters, w)
	}
	c.mu.Unlock()
	w.deliver(now)
}

func (w *waiter) deliver(now time.Time) {
	if w.fn != nil {
		w.fn()
		return
	}
	select {
	case w.ch <- now:
	default:
	}
}

func (w *waiter) Chan() <-chan time.Time { return w.ch }

func (w *waiter) Reset(d time.Duration) bool { return w.arm(d) }

func (w *waiter) Stop() bool {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return w.disarmLocked()
}

// ticker is a waiter seen as a clockwork.Ticker.
type ticker struct{ w *waiter }

func (t ticker) Chan() <-chan time.Time { return t.w.ch }

func (t ticker) Reset(d time.Duration) {
	if d <= 0 {
		panic("scale: non-positive ticker period")
	}
	t.w.c.mu.Lock()
	t.w.period = d
	t.w.c.mu.Unlock()
	t.w.arm(d)
}

func (t ticker) Stop() { _ = t.w.Stop() }
