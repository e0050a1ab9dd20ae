package coalesce

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestABurstOfKicksIsOneFlush(t *testing.T) {
	kick, stop := NewSignal(), make(chan struct{})
	flushed := make(chan struct{}, 10)
	done := make(chan struct{})
	go func() { defer close(done); Run(stop, kick, 20*time.Millisecond, func() { flushed <- struct{}{} }) }()
	for range 100 {
		kick.Kick()
	}
	<-flushed
	select {
	case <-flushed:
		// A kick that landed after the round began is allowed one more
		// round; a third would mean bursts are not coalesced.
		select {
		case <-flushed:
			t.Fatal("100 kicks in a burst flushed three times or more")
		case <-time.After(100 * time.Millisecond):
		}
	case <-time.After(100 * time.Millisecond):
	}
	close(stop)
	<-done
}

func TestStopFlushesWhatWasKicked(t *testing.T) {
	kick, stop := NewSignal(), make(chan struct{})
	var n atomic.Int32
	done := make(chan struct{})
	go func() { defer close(done); Run(stop, kick, time.Hour, func() { n.Add(1) }) }()
	kick.Kick()
	close(stop)
	<-done
	if n.Load() != 1 {
		t.Fatalf("flushed %d times, want once on stop", n.Load())
	}
}

func TestAKickDuringAFlushStartsAnotherRound(t *testing.T) {
	kick, stop := NewSignal(), make(chan struct{})
	var mu sync.Mutex
	rounds := 0
	second := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(stop, kick, time.Millisecond, func() {
			mu.Lock()
			rounds++
			r := rounds
			mu.Unlock()
			switch r {
			case 1:
				kick.Kick() // a change made while the first round writes
			case 2:
				close(second)
			}
		})
	}()
	kick.Kick()
	select {
	case <-second:
	case <-time.After(5 * time.Second):
		t.Fatal("a kick during a flush did not start another round")
	}
	close(stop)
	<-done
}

func TestKickNeverBlocks(t *testing.T) {
	s := NewSignal()
	for range 1000 {
		s.Kick()
	}
	if len(s) != 1 {
		t.Fatalf("signal holds %d kicks, want 1", len(s))
	}
}
