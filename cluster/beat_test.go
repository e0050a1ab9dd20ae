package cluster

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// Ticks fall on the multiples of the period, the same instants on every
// node, and always strictly after now.
func TestNextBeatIsTheNextMultipleOfThePeriod(t *testing.T) {
	every := 500 * time.Millisecond
	base := time.Unix(1_700_000_000, 0)
	for _, c := range []struct{ now, want time.Duration }{
		{0, 500 * time.Millisecond},
		{time.Nanosecond, 500 * time.Millisecond},
		{499 * time.Millisecond, 500 * time.Millisecond},
		{500 * time.Millisecond, time.Second},
		{1234 * time.Millisecond, 1500 * time.Millisecond},
	} {
		if got := nextBeat(base.Add(c.now), every).Sub(base); got != c.want {
			t.Errorf("now base+%v: next beat at base+%v, want base+%v", c.now, got, c.want)
		}
	}
}

// While no stream waits, the beat holds no timer, however long the node
// rests: a lone node does not wake for heartbeats it has nobody to send.
func TestBeatArmsNoTimerWhileNobodyWaits(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Unix(1_700_000_000, 0))
	b := newBeat(clock, 500*time.Millisecond)
	clock.Advance(10 * time.Second)
	b.mu.Lock()
	armed := b.t != nil
	b.mu.Unlock()
	if armed {
		t.Fatal("the beat armed a timer that nobody waits for")
	}
	b.stop()
}

// Every stream waiting for the next tick shares one timer and one channel,
// closed at the next multiple of the period and not before; the next tick
// is armed only once someone waits again.
func TestBeatWakesEveryWaiterAtOneTick(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Unix(1_700_000_000, 0).Add(120 * time.Millisecond))
	b := newBeat(clock, 500*time.Millisecond)
	defer b.stop()
	first := b.next()
	for i := range 5 {
		if ch := b.next(); ch != first {
			t.Fatalf("waiter %d got a channel of its own: one timer per stream again", i+2)
		}
	}
	clock.Advance(379 * time.Millisecond) // 1 ms before the multiple
	select {
	case <-first:
		t.Fatal("the tick came before the period's multiple")
	default:
	}
	clock.Advance(time.Millisecond)
	select {
	case <-first: // the fake clock runs the timer's function on a goroutine
	case <-time.After(5 * time.Second):
		t.Fatal("no tick at the period's multiple")
	}
	b.mu.Lock()
	armed := b.t != nil
	b.mu.Unlock()
	if armed {
		t.Fatal("after the tick the beat re-armed a timer before anybody waited")
	}
	if second := b.next(); second == first {
		t.Fatal("a waiter after the tick got the closed channel of the last one")
	}
}

// After stop, the beat arms nothing: the streams end on their context.
func TestBeatStoppedArmsNothing(t *testing.T) {
	clock := clockwork.NewFakeClock()
	b := newBeat(clock, 500*time.Millisecond)
	b.next()
	b.stop()
	if ch := b.next(); ch != nil {
		t.Fatal("a stopped beat handed out a channel")
	}
	b.mu.Lock()
	armed := b.t != nil
	b.mu.Unlock()
	if armed {
		t.Fatal("a stopped beat kept its timer")
	}
}
