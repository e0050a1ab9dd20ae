package authz

import (
	"strconv"
	"sync"
	"testing"
	"time"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestRateLimiter(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	r := newRateLimiter(Limits{CallsPerSecond: 2, CallBurst: 3}, clk.now)
	allowed := 0
	for range 10 {
		if r.Allow("alice") {
			allowed++
		}
	}
	if allowed != 3 {
		t.Fatalf("burst: %d allowed, want 3", allowed)
	}
	if !r.Allow("bob") {
		t.Fatal("principals share a bucket")
	}
	clk.advance(500 * time.Millisecond)
	if !r.Allow("alice") || r.Allow("alice") {
		t.Fatal("half a second at 2/s must refill exactly one call")
	}
}

func TestRateLimiterDefaults(t *testing.T) {
	if r := NewRateLimiter(Limits{}); !r.Allow("a") || r.tracked() != 0 {
		t.Error("zero limits must be unlimited and track nothing")
	}
	var nilLimiter *RateLimiter
	if !nilLimiter.Allow("a") {
		t.Error("nil limiter must allow")
	}
	clk := &fakeClock{t: time.Unix(0, 0)}
	r := newRateLimiter(Limits{CallsPerSecond: 2.5}, clk.now)
	n := 0
	for range 10 {
		if r.Allow("a") {
			n++
		}
	}
	if n != 3 {
		t.Errorf("default burst = %d, want ceil(2.5) = 3", n)
	}
}

// TestRateLimiterForgetsIdle: buckets that have refilled are dropped as new
// principals arrive, so memory follows busy principals only.
func TestRateLimiterForgetsIdle(t *testing.T) {
	clk := &fakeClock{t: time.Unix(0, 0)}
	r := newRateLimiter(Limits{CallsPerSecond: 10, CallBurst: 1}, clk.now)
	for i := range minSweep {
		r.Allow("p" + strconv.Itoa(i))
	}
	// "busy" is kept: its bucket is empty at sweep time.
	clk.advance(time.Second)
	r.Allow("busy")
	if r.tracked() != 1 {
		t.Fatalf("tracked %d after the sweep, want 1 (busy)", r.tracked())
	}
	if r.Allow("busy") {
		t.Fatal("busy's spent bucket was reset by the sweep")
	}
}

func TestRateLimiterConcurrent(t *testing.T) {
	clk := &fakeClock{t: time.Unix(0, 0)}
	r := newRateLimiter(Limits{CallsPerSecond: 1, CallBurst: 5}, clk.now)
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for range 8 {
		wg.Go(func() {
			for range 10 {
				if r.Allow("shared") {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if allowed != 5 {
		t.Errorf("allowed %d of 80 concurrent calls at a stopped clock, want the burst of 5", allowed)
	}
}

func TestSessionAllowed(t *testing.T) {
	l := Limits{SessionsPerPrincipal: 2}
	if !l.SessionAllowed(0) || !l.SessionAllowed(1) || l.SessionAllowed(2) {
		t.Error("limit 2")
	}
	if !(Limits{}).SessionAllowed(1000) {
		t.Error("zero is unlimited")
	}
}
