package cluster

import (
	"testing"
	"time"
)

// At rest the rounds double their spacing up to the ceiling; any activity
// brings the base period back, and the maps tick once per base period of
// time whatever the spacing.
func TestAEPaceStretchesAtRestAndTicksByTime(t *testing.T) {
	p := newAEPace(Config{AntiEntropy: 200 * time.Millisecond, AntiEntropyQuiet: 1600 * time.Millisecond})
	now := time.Unix(1000, 0)
	ticks, next := p.round(now, 5)
	if ticks != 1 || next != 200*time.Millisecond {
		t.Fatalf("first round: %d ticks, next in %v; want 1 and 200ms", ticks, next)
	}
	for i, want := range []time.Duration{400, 800, 1600, 1600} {
		elapsed := next
		now = now.Add(elapsed)
		var got int
		got, next = p.round(now, 5)
		if next != want*time.Millisecond {
			t.Errorf("quiet round %d: next in %v, want %v", i+1, next, want*time.Millisecond)
		}
		if got != int(elapsed/p.base) {
			t.Errorf("quiet round %d, %v after the last: %d ticks, want %d", i+1, elapsed, got, int(elapsed/p.base))
		}
	}
	now = now.Add(next)
	if _, next = p.round(now, 6); next != 200*time.Millisecond {
		t.Errorf("after activity: next in %v, want 200ms", next)
	}
	p.round(now.Add(next), 6)
	if !p.wake() || p.wake() {
		t.Error("wake after a quiet round should report once that the timer must be re-armed")
	}
	if ticks, _ := p.round(now.Add(time.Hour), 6); ticks != 8 {
		t.Errorf("after an hour's stall: %d ticks, want the ceiling's 8", ticks)
	}
}
