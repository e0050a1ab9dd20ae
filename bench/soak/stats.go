package main

import (
	"slices"
	"sync"
	"time"
)

// latencies collects call latencies: those of the current second, for the
// time series, and all of them, for the run's percentiles.
type latencies struct {
	mu   sync.Mutex
	cur  []time.Duration
	all  []time.Duration
	errs int64 // calls that failed in the current second
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.cur = append(l.cur, d)
	l.all = append(l.all, d)
	l.mu.Unlock()
}

func (l *latencies) failed() {
	l.mu.Lock()
	l.errs++
	l.mu.Unlock()
}

// flush returns the current second's calls, their p99 and failures, and
// starts the next second.
func (l *latencies) flush() (calls int, p99 time.Duration, errs int64) {
	l.mu.Lock()
	cur, e := l.cur, l.errs
	l.cur, l.errs = make([]time.Duration, 0, len(cur)), 0
	l.mu.Unlock()
	return len(cur), percentile(cur, 0.99), e
}

// reset forgets every latency recorded so far.
func (l *latencies) reset() {
	l.mu.Lock()
	l.cur, l.all, l.errs = nil, nil, 0
	l.mu.Unlock()
}

// overall returns the run's p50, p99 and maximum.
func (l *latencies) overall() (n int, p50, p99, maxi time.Duration) {
	l.mu.Lock()
	all := slices.Clone(l.all)
	l.mu.Unlock()
	if len(all) == 0 {
		return 0, 0, 0, 0
	}
	slices.Sort(all)
	return len(all), percentileSorted(all, 0.5), percentileSorted(all, 0.99), all[len(all)-1]
}

// percentile is the nearest-rank q-quantile of ds (0 when empty); ds is
// sorted in place.
func percentile(ds []time.Duration, q float64) time.Duration {
	slices.Sort(ds)
	return percentileSorted(ds, q)
}

func percentileSorted(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(q*float64(len(ds)) + 0.999999999) // ceil(q·n), the nearest rank
	i = min(max(i, 1), len(ds))
	return ds[i-1]
}

// median of xs (0 when empty); xs is not modified.
func median(xs []int64) int64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// within reports whether v is within frac of base, either way.
func within(v, base int64, frac float64) bool {
	d := float64(v - base)
	return d <= float64(base)*frac && -d <= float64(base)*frac
}
