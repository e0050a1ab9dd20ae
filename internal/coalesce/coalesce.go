// Package coalesce turns bursts of "something changed" into one round of
// work: the one loop behind the swarm's registry publisher and the
// journal's fsync round. A session clicked ten times within a round is
// written once, with its state as it is then.
package coalesce

import "time"

// Signal is a one-slot wake-up: Kick never blocks, and any number of kicks
// before the loop wakes count as one.
type Signal chan struct{}

// NewSignal returns a ready Signal.
func NewSignal() Signal { return make(Signal, 1) }

// Kick wakes the loop; it never blocks.
func (s Signal) Kick() {
	select {
	case s <- struct{}{}:
	default:
	}
}

// Run calls flush once per burst of kicks: the first kick starts a delay,
// kicks during it join the round, then flush runs (a kick that arrives
// while flush runs starts the next round). When stop is closed Run flushes
// once more, so nothing kicked is left behind, and returns.
func Run(stop <-chan struct{}, kick Signal, delay time.Duration, flush func()) {
	timer := time.NewTimer(delay)
	timer.Stop()
	for {
		select {
		case <-kick:
		case <-stop:
			flush()
			return
		}
		timer.Reset(delay)
		select {
		case <-timer.C:
		case <-stop:
			timer.Stop()
			flush()
			return
		}
		flush()
	}
}
