package cluster

import (
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// beat is a node's one heartbeat clock, shared by every Replicate stream it
// sends on. Its ticks fall on the multiples of the heartbeat period on the
// cluster's clock, so:
//
//   - a node wakes once a period for all its peers, not once per stream at
//     a phase of its own (2(N−1) wake-ups a period before, counting the
//     acknowledgements, each finding the process asleep);
//   - nodes whose clocks agree (NTP keeps a cluster's within milliseconds)
//     send their heartbeats in the same instant, so the heartbeats a node
//     receives and the acknowledgements of its own arrive in one burst
//     too, while its threads are awake.
//
// At rest a heartbeat is a few microseconds of work, and waking an idle
// process for it (a timer, a thread out of its futex, the network poller)
// costs more than the work: the bursts are what a node at rest pays less
// for. Each stream still heartbeats every period, so the lease arithmetic
// (lease.go) is unchanged; only the phase moved.
//
// The timer is armed only while some stream waits for the next tick: a
// lone node holds none.
type beat struct {
	clock clockwork.Clock
	every time.Duration

	mu      sync.Mutex
	ch      chan struct{} // closed at the next tick; nil while nobody waits
	t       clockwork.Timer
	stopped bool
}

func newBeat(clock clockwork.Clock, every time.Duration) *beat {
	// A period under a millisecond (a test's nanosecond lease) would tick
	// back to back.
	return &beat{clock: clock, every: max(every, time.Millisecond)}
}

// next returns a channel closed at the next tick. Every caller before that
// tick gets the same channel; the first one arms the timer.
func (b *beat) next() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return nil // never fires: the streams end on their context
	}
	if b.ch == nil {
		b.ch = make(chan struct{})
		now := b.clock.Now()
		b.t = b.clock.AfterFunc(nextBeat(now, b.every).Sub(now), b.fire)
	}
	return b.ch
}

// fire closes the channel of the tick that came.
func (b *beat) fire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch, b.t = nil, nil
	}
}

// stop disarms the timer for good.
func (b *beat) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopped = true
	if b.t != nil {
		b.t.Stop()
		b.t = nil
	}
}

// nextBeat is the first multiple of every, counted from the zero time,
// strictly after now: the same instants on every node.
func nextBeat(now time.Time, every time.Duration) time.Time {
	return now.Truncate(every).Add(every)
}
