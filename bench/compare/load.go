package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// worker is one load client: a connection and the tool call it repeats,
// or, when do is set, the call it makes instead (the peer round trip).
type worker struct {
	c    *client
	tool string
	args map[string]any
	do   func(context.Context) error
}

// call makes the worker's call once.
func (w worker) call(ctx context.Context) error {
	if w.do != nil {
		return w.do(ctx)
	}
	_, err := w.c.callTool(ctx, w.tool, w.args)
	return err
}

// cell is one measured (round, concurrency, series) window.
type cell struct {
	Round      int     `json:"round"`
	Conc       int     `json:"concurrency"`
	Series     string  `json:"series"`
	Calls      int     `json:"calls"`
	Errors     int     `json:"errors"`
	FirstError string  `json:"first_error,omitempty"`
	Seconds    float64 `json:"seconds"`
	Throughput float64 `json:"calls_per_s"`
	P50us      float64 `json:"p50_us"`
	P99us      float64 `json:"p99_us"`
	CPUus      float64 `json:"cpu_us_per_call"` // server CPU (all of the series' processes) per call
}

// measure runs the workers flat out for warm+dur and reports the calls that
// started after warm and finished within the window, with the CPU the
// servers spent in that window.
func measure(ctx context.Context, ws []worker, servers []*proc, warm, dur time.Duration) (cell, error) {
	start := time.Now()
	mStart, mEnd := start.Add(warm), start.Add(warm+dur)
	type out struct {
		lat   []time.Duration
		errs  int
		first error
	}
	outs := make([]out, len(ws))
	var wg sync.WaitGroup
	for i := range ws {
		wg.Go(func() {
			o := &outs[i]
			for {
				t0 := time.Now()
				if !t0.Before(mEnd) || ctx.Err() != nil {
					return
				}
				err := ws[i].call(ctx)
				t1 := time.Now()
				if t0.Before(mStart) || t1.After(mEnd) {
					continue
				}
				if err != nil {
					o.errs++
					if o.first == nil {
						o.first = err
					}
					continue
				}
				o.lat = append(o.lat, t1.Sub(t0))
			}
		})
	}
	time.Sleep(time.Until(mStart))
	cpu0, err0 := cpuOf(servers)
	time.Sleep(time.Until(mEnd))
	cpu1, err1 := cpuOf(servers)
	wg.Wait()
	if err0 != nil || err1 != nil {
		return cell{}, fmt.Errorf("reading server CPU: %v %v", err0, err1)
	}
	var lat []time.Duration
	c := cell{Conc: len(ws), Seconds: dur.Seconds()}
	for _, o := range outs {
		lat = append(lat, o.lat...)
		c.Errors += o.errs
		if o.first != nil && c.FirstError == "" {
			c.FirstError = o.first.Error()
		}
	}
	c.Calls = len(lat)
	c.Throughput = float64(c.Calls) / dur.Seconds()
	c.P50us = us(percentile(lat, 0.50))
	c.P99us = us(percentile(lat, 0.99))
	if c.Calls > 0 {
		c.CPUus = float64(cpu1-cpu0) * (1e6 / clockTicks) / float64(c.Calls)
	}
	return c, nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// percentile returns the nearest-rank q-quantile of ds (sorting ds).
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(q*float64(len(ds))+0.999999) - 1
	return ds[max(0, min(i, len(ds)-1))]
}

// median returns the median of xs (the mean of the middle two for an even
// count), leaving xs unchanged.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
