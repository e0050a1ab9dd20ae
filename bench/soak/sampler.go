package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// sample is one second of the time series.
type sample struct {
	T          float64 `json:"t"` // seconds since the baseline began
	Phase      string  `json:"phase"`
	RSSKB      []int64 `json:"rss_kb"`     // per node
	AnonKB     []int64 `json:"anon_kb"`    // RssAnon per node
	FileKB     []int64 `json:"file_kb"`    // RssFile per node
	HeapKB     []int64 `json:"heap_kb"`    // go_memstats_heap_inuse_bytes per node, in KiB
	Goroutines []int64 `json:"goroutines"` // per node
	Calls      int     `json:"calls"`      // answered in this second
	Failed     int64   `json:"failed"`     // failed in this second (expected retries included)
	P99ms      float64 `json:"p99_ms"`     // of this second's answered calls
}

// sampler takes one sample a second.
type sampler struct {
	nodes  []*node
	lat    *latencies
	hc     *http.Client
	t0     time.Time
	series []sample
}

func (s *sampler) take(ctx context.Context, phase string) (sample, error) {
	calls, p99, failed := s.lat.flush()
	sm := sample{T: time.Since(s.t0).Seconds(), Phase: phase, Calls: calls, Failed: failed,
		P99ms: float64(p99.Microseconds()) / 1000}
	for _, n := range s.nodes {
		rss, anon, file, err := rss(n)
		if err != nil {
			return sm, err
		}
		g, heap, err := goroutines(ctx, s.hc, n)
		if err != nil {
			return sm, err
		}
		sm.HeapKB = append(sm.HeapKB, heap/1024)
		sm.RSSKB, sm.AnonKB, sm.FileKB = append(sm.RSSKB, rss), append(sm.AnonKB, anon), append(sm.FileKB, file)
		sm.Goroutines = append(sm.Goroutines, g)
	}
	s.series = append(s.series, sm)
	return sm, nil
}

// tick calls f once a second until it returns true or an error.
func (s *sampler) tick(ctx context.Context, phase string, f func(sample) bool) error {
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tk.C:
		}
		sm, err := s.take(ctx, phase)
		if err != nil {
			return fmt.Errorf("sampling the nodes (%s): %w", phase, err)
		}
		if f(sm) {
			return nil
		}
	}
}

func (s *sampler) sampleFor(ctx context.Context, phase string, d time.Duration) error {
	end := time.Now().Add(d)
	return s.tick(ctx, phase, func(sample) bool { return !time.Now().Before(end) })
}

func (s *sampler) sampleUntil(ctx context.Context, phase string, done <-chan struct{}) error {
	n := 0
	return s.tick(ctx, phase, func(sm sample) bool {
		if n++; n%30 == 0 {
			slog.Info("load", "t", int(sm.T), "calls/s", sm.Calls, "p99_ms", sm.P99ms, "rss_kb", sm.RSSKB, "goroutines", sm.Goroutines)
		}
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
}

// level is one node's goroutines and RSS: a median of samples.
type level struct {
	Node       string `json:"node"`
	Goroutines int64  `json:"goroutines"`
	RSSKB      int64  `json:"rss_kb"`
	AnonKB     int64  `json:"anon_kb"`
	FileKB     int64  `json:"file_kb"`
	HeapKB     int64  `json:"heap_kb"`
}

// baseline is each node's median over the last n samples.
func (s *sampler) baseline(n int) []level {
	n = max(n, 1)
	tailS := s.series[max(0, len(s.series)-n):]
	var out []level
	for i, nd := range s.nodes {
		var g, r, a, f, h []int64
		for _, sm := range tailS {
			g, r = append(g, sm.Goroutines[i]), append(r, sm.RSSKB[i])
			a, f, h = append(a, sm.AnonKB[i]), append(f, sm.FileKB[i]), append(h, sm.HeapKB[i])
		}
		out = append(out, level{Node: nd.Name, Goroutines: median(g), RSSKB: median(r), AnonKB: median(a), FileKB: median(f), HeapKB: median(h)})
	}
	return out
}

// settleWindow is how many consecutive samples must be within the tolerance
// (their median is the figure reported), so one lucky sample does not pass.
const settleWindow = 10

// settle samples until the median of the last settleWindow samples of every
// node is within tol of base for goroutines and RSS, or max passes; it
// returns the last such medians either way.
func (s *sampler) settle(ctx context.Context, base []level, tol float64, maxWait time.Duration) ([]level, error) {
	end := time.Now().Add(maxWait)
	n := 0
	var last []level
	err := s.tick(ctx, "settle", func(sample) bool {
		n++
		if n < settleWindow {
			return false
		}
		last = s.baseline(settleWindow)
		if allWithin(last, base, tol) {
			return true
		}
		if n%30 == 0 {
			slog.Info("settle: not back yet", "now", last, "baseline", base)
		}
		return !time.Now().Before(end)
	})
	return last, err
}

func allWithin(now, base []level, tol float64) bool {
	for i := range now {
		if !within(now[i].Goroutines, base[i].Goroutines, tol) || !within(now[i].RSSKB, base[i].RSSKB, tol) {
			return false
		}
	}
	return true
}
