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

	"github.com/mcpswarm/mcpswarm/bench/internal/procstat"
	"github.com/mcpswarm/mcpswarm/bench/internal/procwait"
)

// row is one node's figures over the window.
type row struct {
	name   string
	cpuPct float64 // CPU time over wall time, in % of one core
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
	if err := procwait.Sleep(ctx, k.window); err != nil {
		return nil, err
	}
	after, t1, err := c.cpuTicks()
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
		rows[i] = row{name: n.Name, cpuPct: 100 * cpu / wall, rssKB: rss}
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
func report(w io.Writer, k knobs, rows []row) {
	fmt.Fprintf(w, "%d nodes at rest, %d sessions each (one principal), settled %s, measured %s; CPU %% of one core (utime+stime)\n",
		k.n, k.sessions, k.settle, k.window)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "node\tCPU %\tRSS MiB\t")
	cpus := make([]float64, len(rows))
	var sum float64
	for i, r := range rows {
		fmt.Fprintf(tw, "%s\t%.2f\t%.1f\t\n", r.name, r.cpuPct, float64(r.rssKB)/1024)
		cpus[i] = r.cpuPct
		sum += r.cpuPct
	}
	slices.Sort(cpus)
	_ = tw.Flush()
	fmt.Fprintf(w, "CPU %% per node: median %.2f, mean %.2f, max %.2f; all nodes together %.2f\n",
		cpus[len(cpus)/2], sum/float64(len(cpus)), cpus[len(cpus)-1], sum)
}
