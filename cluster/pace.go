package cluster

import (
	"time"

	"github.com/jonboulle/clockwork"
)

// aePace spaces anti-entropy rounds: AntiEntropy apart while anything
// changes, and twice as far apart after each round that found nothing
// changed since the one before, up to AntiEntropyQuiet. A swarm at rest
// then wakes for a digest exchange a few times a minute instead of
// several times a second; a write, a remote change or a membership change
// brings the short period back. Anti-entropy is the backstop: a gap in a
// peer's own deltas is found by the stream heartbeats, not by it.
//
// It also counts the base periods that passed, so the maps' logical
// clocks (delta-log ages, DropMemory) keep advancing at the configured
// rate however far apart rounds are. Pure: the loop passes the clock and
// the activity count in.
type aePace struct {
	base, ceiling time.Duration
	quiet         int           // rounds in a row that found nothing changed
	seen          uint64        // the activity count at the last round
	last          time.Time     // the last round; zero before the first
	owed          time.Duration // time since the maps last ticked, less than base
}

func newAEPace(cfg Config) aePace {
	return aePace{base: cfg.AntiEntropy, ceiling: max(cfg.AntiEntropyQuiet, cfg.AntiEntropy)}
}

// round is called at each round with the activity count (own writes and
// remote changes applied, ever): it returns how many base periods the
// maps should tick (one at the first round) and the period until the next
// round, before jitter.
func (p *aePace) round(now time.Time, activity uint64) (ticks int, next time.Duration) {
	if p.last.IsZero() {
		ticks = 1
	} else {
		// At most one ceiling's worth: a stalled loop (a paused process)
		// does not age every delta log at once.
		p.owed += min(now.Sub(p.last), p.ceiling)
		ticks = int(p.owed / p.base)
		p.owed -= time.Duration(ticks) * p.base
	}
	p.last = now
	if activity == p.seen {
		p.quiet++
	} else {
		p.quiet, p.seen = 0, activity
	}
	return ticks, p.period()
}

// period is the wait before the next round.
func (p *aePace) period() time.Duration {
	d := p.base
	for range p.quiet {
		if d >= p.ceiling/2 {
			return p.ceiling
		}
		d *= 2
	}
	return d
}

// wake brings back the base period after a change the loop saw itself (a
// flush of own writes, a membership change); it reports whether the
// pending round was further off, so the caller re-arms its timer.
func (p *aePace) wake() bool {
	if p.quiet == 0 {
		return false
	}
	p.quiet = 0
	return true
}

// lazyTicker is a ticker that exists only while there is work for it: the
// dead grace's expiry runs only while some origin is hidden.
type lazyTicker struct {
	clock clockwork.Clock
	every time.Duration
	t     clockwork.Ticker
}

// set starts the ticker when on and it is stopped, and stops it when off.
func (l *lazyTicker) set(on bool) {
	switch {
	case on && l.t == nil:
		l.t = l.clock.NewTicker(l.every)
	case !on && l.t != nil:
		l.t.Stop()
		l.t = nil
	}
}

// C is the ticker's channel, or nil (a select case that never fires).
func (l *lazyTicker) C() <-chan time.Time {
	if l.t == nil {
		return nil
	}
	return l.t.Chan()
}
