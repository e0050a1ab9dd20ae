package authz

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// RateLimiter limits tool calls per principal with a token bucket each
// (Limits.CallsPerSecond, Limits.CallBurst). It is safe for concurrent use.
// A bucket that has refilled completely is indistinguishable from a new one,
// so such buckets are dropped as the map grows: memory tracks the principals
// that are actually busy.
type RateLimiter struct {
	limit rate.Limit
	burst int
	now   func() time.Time

	mu        sync.Mutex
	buckets   map[string]*rate.Limiter
	nextSweep int
}

// minSweep is the map size below which no sweep runs.
const minSweep = 1024

// NewRateLimiter returns a limiter for l. CallsPerSecond <= 0 means
// unlimited; CallBurst <= 0 means one second's worth of calls (at least 1).
func NewRateLimiter(l Limits) *RateLimiter {
	return newRateLimiter(l, time.Now)
}

func newRateLimiter(l Limits, now func() time.Time) *RateLimiter {
	r := &RateLimiter{now: now, buckets: map[string]*rate.Limiter{}, nextSweep: minSweep}
	if l.CallsPerSecond <= 0 {
		r.limit = rate.Inf
		return r
	}
	r.limit = rate.Limit(l.CallsPerSecond)
	r.burst = l.CallBurst
	if r.burst <= 0 {
		r.burst = max(1, int(math.Ceil(l.CallsPerSecond)))
	}
	return r
}

// Allow reports whether principal may make one more call now, and spends a
// token if so.
func (r *RateLimiter) Allow(principal string) bool {
	if r == nil || r.limit == rate.Inf {
		return true
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.buckets[principal]
	if !ok {
		if len(r.buckets) >= r.nextSweep {
			r.sweep(now)
		}
		b = rate.NewLimiter(r.limit, r.burst)
		r.buckets[principal] = b
	}
	return b.AllowN(now, 1)
}

// sweep drops full buckets and sets the next sweep at twice what is left,
// so sweeping costs amortised O(1) per new principal.
func (r *RateLimiter) sweep(now time.Time) {
	for k, b := range r.buckets {
		if b.TokensAt(now) >= float64(r.burst) {
			delete(r.buckets, k)
		}
	}
	r.nextSweep = max(minSweep, 2*len(r.buckets))
}

// tracked is the number of principals with a bucket (for tests).
func (r *RateLimiter) tracked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.buckets)
}
