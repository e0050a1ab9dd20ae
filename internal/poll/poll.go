// Package poll is the tests' one way to wait for something another
// goroutine, node or process brings about: poll the condition until it
// holds or a deadline passes. A test that waits for a state waits for that
// state, never for a guessed duration, so it is as fast as the code allows
// and only slow, not wrong, on a loaded machine.
//
// Polling is the await of last resort: where the code raises an event (a
// channel, a hook, a subscription) a test waits on that instead. The
// conditions polled here are those that raise none a test can subscribe
// to: replicated state across nodes, memberlist's verdicts, a goroutine
// count, a process's log or port.
package poll

import (
	"fmt"
	"testing"
	"time"
)

// The poll interval starts short, so a condition that is met almost at once
// costs little, and doubles up to maxInterval, so a long wait does not keep
// a busy machine's cores away from the code it waits for.
const (
	minInterval = time.Millisecond
	maxInterval = 10 * time.Millisecond
)

// Wait calls cond until it returns nil, and returns nil; or, once timeout
// has passed, returns cond's last error.
func Wait(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	interval := minInterval
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		<-t.C
		interval = min(2*interval, maxInterval)
		t.Reset(interval)
	}
}

// Until waits until cond returns nil, failing tb with what and cond's last
// error if timeout passes first.
func Until(tb testing.TB, timeout time.Duration, what string, cond func() error) {
	tb.Helper()
	if err := Wait(timeout, cond); err != nil {
		tb.Fatalf("timed out after %v waiting until %s: %v", timeout, what, err)
	}
}

// True waits until cond returns true, failing tb with what if timeout
// passes first.
func True(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	Until(tb, timeout, what, func() error {
		if !cond() {
			return fmt.Errorf("still false")
		}
		return nil
	})
}
