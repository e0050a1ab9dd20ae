package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/mcpswarm/mcpswarm/bench/internal/hostinfo"
	"github.com/mcpswarm/mcpswarm/bench/internal/procstat"
	"github.com/mcpswarm/mcpswarm/bench/internal/procwait"
)

// row is one node's figures over the window.
type row struct {
	name   string
	cpuPct float64 // CPU time over wall time, in % of one core
	wakes  float64 // its threads' sleeps (each a later wake-up) per second
	rssKB  int64   // at the end of the window
}

// measure reads every node's CPU time before and after the window (and
// takes node 1's CPU profile over it when asked).
func (c *cluster) measure(ctx context.Context, k knobs) ([]row, error) {
	prof := c.profile(ctx, k)
	before, t0, err := c.cpuTicks()
	if err != nil {
		return nil, err
	}
	sleeps0, err := c.sleeps()
	if err != nil {
		return nil, err
	}
	if err := procwait.Sleep(ctx, k.window); err != nil {
		return nil, err
	}
	after, t1, err := c.cpuTicks()
	if err != nil {
		return nil, err
	}
	sleeps1, err := c.sleeps()
	if err != nil {
		return nil, err
	}
	if err := prof(); err != nil {
		return nil, err
	}
	wall := t1.Sub(t0).Seconds()
	rows := make([]row, len(c.Nodes))
	for i, n := range c.Nodes {
		rss, err := procstat.RSSKB(n.PID())
		if err != nil {
			return nil, err
		}
		cpu := float64(after[i]-before[i]) / procstat.UserHZ
		rows[i] = row{name: n.Name, cpuPct: 100 * cpu / wall, wakes: float64(sleeps1[i]-sleeps0[i]) / wall, rssKB: rss}
	}
	return rows, nil
}

// cpuTicks reads every node's utime+stime, and when.
func (c *cluster) cpuTicks() ([]int64, time.Time, error) {
	out := make([]int64, len(c.Nodes))
	for i, n := range c.Nodes {
		t, err := procstat.CPUTicks(n.PID())
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("%s: %w", n.Name, err)
		}
		out[i] = t
	}
	return out, time.Now(), nil
}

// sleeps reads how often every node's threads went to sleep so far.
func (c *cluster) sleeps() ([]int64, error) {
	out := make([]int64, len(c.Nodes))
	for i, n := range c.Nodes {
		s, err := procstat.Sleeps(n.PID())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.Name, err)
		}
		out[i] = s
	}
	return out, nil
}

// profile starts node 1's CPU profile over the window when asked; the
// function it returns waits for the profile and writes it.
func (c *cluster) profile(ctx context.Context, k knobs) func() error {
	if k.profile == "" {
		return func() error { return nil }
	}
	var (
		wg  sync.WaitGroup
		err error
	)
	wg.Go(func() {
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", c.Nodes[0].Debug, int(k.window.Seconds()))
		err = fetchTo(ctx, url, k.profile)
	})
	return func() error { wg.Wait(); return err }
}

func fetchTo(ctx context.Context, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("building the profile request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("taking the CPU profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("taking the CPU profile: HTTP %d", resp.StatusCode)
	}
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("writing the CPU profile: %w", err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("writing the CPU profile: %w", err)
	}
	return f.Close()
}

// report prints one line per node and the median, mean and maximum.
// loadBefore is the machine's load average before the first node started.
func report(w io.Writer, k knobs, loadBefore string, rows []row) {
	fmt.Fprintf(w, "%d nodes at rest (%s timers), %d sessions each (one principal), settled %s, measured %s; CPU %% of one core (utime+stime), wake-ups/s (threads' voluntary sleeps); load average %s before the start, %s at the end\n",
		k.n, k.timers, k.sessions, k.settle, k.window, loadBefore, hostinfo.LoadAvg())
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "node\tCPU %\twake-ups/s\tRSS MiB\t")
	cpus := make([]float64, len(rows))
	wakes := make([]float64, len(rows))
	var sum float64
	for i, r := range rows {
		fmt.Fprintf(tw, "%s\t%.2f\t%.0f\t%.1f\t\n", r.name, r.cpuPct, r.wakes, float64(r.rssKB)/1024)
		cpus[i], wakes[i] = r.cpuPct, r.wakes
		sum += r.cpuPct
	}
	slices.Sort(cpus)
	slices.Sort(wakes)
	_ = tw.Flush()
	fmt.Fprintf(w, "CPU %% per node: median %.2f, mean %.2f, max %.2f; all nodes together %.2f; wake-ups/s per node: median %.0f\n",
		cpus[len(cpus)/2], sum/float64(len(cpus)), cpus[len(cpus)-1], sum, wakes[len(wakes)/2])
}
