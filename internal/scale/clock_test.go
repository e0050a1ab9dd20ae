package scale

import (
	"testing"
	"time"
)

// TestAPausedClockStandsStillAndFiresNothing: paused, the harness's clock
// reads the same time and its timers and tickers wait; resumed, it goes on
// from where it stood and they fire at their own time.
func TestAPausedClockStandsStillAndFiresNothing(t *testing.T) {
	c := newPausableClock()
	c.resume()
	timer := c.NewTimer(5 * time.Millisecond)
	tick := c.NewTicker(5 * time.Millisecond)
	fired := make(chan struct{})
	c.AfterFunc(5*time.Millisecond, func() { close(fired) })
	c.pause()
	at, wallAt := c.Now(), time.Now()
	// Long enough for all three to be due on wall time.
	<-time.After(30 * time.Millisecond)
	if now := c.Now(); !now.Equal(at) {
		t.Fatalf("a paused clock moved from %v to %v", at, now)
	}
	select {
	case <-timer.Chan():
		t.Fatal("a timer fired while its clock was paused")
	case <-tick.Chan():
		t.Fatal("a ticker ticked while its clock was paused")
	case <-fired:
		t.Fatal("an AfterFunc ran while its clock was paused")
	default:
	}
	c.resume()
	<-timer.Chan()
	<-tick.Chan()
	<-tick.Chan() // it ticks again
	<-fired
	// The 30 ms paused do not count.
	if moved, wall := c.Since(at), time.Since(wallAt); moved > wall-30*time.Millisecond {
		t.Fatalf("resumed, the clock moved %v in %v of wall time since the pause: not from where it stood", moved, wall)
	}
	tick.Stop()
}

// TestAResetClockTimerDeliversNothingStale: as a Go timer, a reset or
// stopped timer leaves no earlier expiry in its channel.
func TestAResetClockTimerDeliversNothingStale(t *testing.T) {
	c := newPausableClock()
	c.resume()
	timer := c.NewTimer(time.Millisecond)
	<-time.After(10 * time.Millisecond) // it has fired into its channel
	if timer.Reset(time.Hour) {
		t.Fatal("a reset reported armed a timer that had fired")
	}
	select {
	case <-timer.Chan():
		t.Fatal("a reset timer delivered its earlier expiry")
	default:
	}
	if !timer.Stop() {
		t.Fatal("stopping an armed timer reported it was not armed")
	}
}
