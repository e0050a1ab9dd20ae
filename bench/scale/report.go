package main

import (
	"fmt"
	"image/color"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/mcpswarm/mcpswarm/internal/scale"
)

// report is one bench-scale run: a result per swarm size.
type report struct {
	Started time.Time      `json:"started"`
	Quick   bool           `json:"quick"`
	Results []scale.Result `json:"results"`
}

// costs are the per-record heap costs, medians over the sizes (each size
// measures them; one reading is noisy).
func (r report) costs() (conn, session, actor, link float64) {
	var c, s, a, l []float64
	for _, res := range r.Results {
		c = append(c, res.ConnCost)
		s = append(s, res.SessionCost-res.SessionActor/float64(res.N))
		a = append(a, res.SessionActor)
		l = append(l, res.LinkCost)
	}
	return median(c), median(s), median(a), median(l)
}

// records is what the swarm's sessions and connection records cost a
// node at rest.
func (r report) records(res scale.Result) float64 {
	conn, session, actor, _ := r.costs()
	return float64(res.Conns)*conn + float64(res.Sessions)*session + float64(res.Load.Sessions)*actor
}

// links is what a node's gRPC connections to its peers cost it: both
// ends' worth per peer.
func (r report) links(res scale.Result) float64 {
	_, _, _, link := r.costs()
	return res.PeerConns / 2 * link
}

// residual is a node's heap at rest less its records and peer links: the
// part that should not grow with N.
func (r report) residual(res scale.Result) float64 {
	return res.HeapPerNode - r.records(res) - r.links(res)
}

func (r report) table() string {
	var b strings.Builder
	fmt.Fprintln(&b, "| N | bytes / write (per peer) | msgs / write (per peer) | a write alone: CPU; reach p50 / p99 | reach p50 / p99 at rest | reach p50 / p99 under load | join catch-up | dead hidden | approvals/s (entries held per approval) | heap / node: records + peer links + rest | CPU / node under load; at rest (timers frozen) | msgs/s / node at rest: gRPC, gossip |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, res := range r.Results {
		peers := float64(res.N - 1)
		fmt.Fprintf(&b, "| %d | %.0f (%.0f) | %.0f (%.1f) | %s; %s / %s | %s / %s | %s / %s | %s | %s | %.0f%s (%s) | %.2f MiB: %.2f + %.2f + %.2f | %.1f %%; %.2f %% (%.2f %%) | %.0f, %.0f |\n",
			res.N, res.WriteBytes, res.WriteBytes/peers, res.WriteMsgs, res.WriteMsgs/peers,
			ms(res.WriteCPU), ms(res.AloneP50), ms(res.AloneP99), ms(res.RestReachP50), ms(res.RestReachP99), ms(res.ReachP50), reachP99(res), ms(res.CatchUp), ms(res.Hidden), res.Approvals, refused(res.Refused), perApproval(res),
			mib(res.HeapPerNode), mib(r.records(res)), mib(r.links(res)), mib(r.residual(res)),
			100*res.LoadCPU, 100*res.RestCPU, 100*res.RestCPUFrozen, res.RestGRPC, res.RestGossip)
	}
	return b.String()
}

func (r report) markdown(charts []string) string {
	var b strings.Builder
	first := r.Results[0]
	conn, session, actor, link := r.costs()
	fmt.Fprintf(&b, "# How the swarm grows: N nodes in one process\n\n")
	fmt.Fprintf(&b, "Run %s by `make bench-scale` (`bench/scale`, `internal/scale`)%s on %d cores; machine load average at each start: %s.\n\n",
		r.Started.Format("2006-01-02 15:04 UTC"), map[bool]string{true: ", -quick", false: ""}[r.Quick], first.Cores, loads(r.Results))
	fmt.Fprintf(&b, "Each N runs in its own process: N swarm nodes (cluster, swarm, session manager, gRPC server) on `internal/memnet`, "+
		"memberlist on the loopback timers (`cluster.LocalConfig`), the cluster's own timers on a clock that follows wall time (the runtime's timers) and pauses, "+
		"stopped where a figure needs them still. Fixed load per node: %d counter sessions, %d connection records, %.1f clicks/s, "+
		"%.1f initialize+DELETE/s, %d approval client(s).\n\n", first.Load.Sessions, first.Load.Conns, first.Load.Clicks, first.Load.Churn, first.Load.Approvers)
	b.WriteString(r.table())
	b.WriteString(`
- **bytes, msgs / write**: gRPC bytes and transport writes the whole swarm sent per connection-record write (push, acknowledgements), the cluster's clock frozen so no heartbeat or anti-entropy runs; per peer in brackets.
- **a write alone**: the same writes, one at a time, the cluster's clock frozen: the process's CPU time per write (every node's part of it, less the frozen swarm's own CPU at rest) and how long each took to reach every node: the fan-out's cost with nothing else on the cores.
- **reach**: from a connection-record write on a random node (every 50 ms) until every node has it (Put answers only then), with nothing else running (at rest) and under the load (run last, after the kill: N−1 nodes); "lagging" counts (write, node) pairs answered without that node after the 2 s acknowledgement bound, the node refusing the connection until caught up, as the consistency contract allows.
- **join catch-up**: from the last node's Start until it holds every other node's sessions and connection records and is in sync.
- **dead hidden**: from a kill (no leave, gRPC port closed) until no node shows the dead node's sessions as available.
- **approvals/s**: fresh request states spent, every live node asking at once (after the kill: N−1 nodes), each decided by its two holders (the nonce's first two live members in rendezvous order); in brackets the spent-state entries all nodes hold, once settled, per approval.
- **heap / node**: live heap after GC at rest over N, less the process's before the swarm and less the in-memory connections' buffers (a kernel's with sockets); split into the swarm's sessions and connection records (count × the costs below), the node's gRPC links to its N−1 peers (× the link cost below), and the rest.
- **CPU under load**: process CPU time over wall time over N while the load ran (the harness's goroutines included); the machine's other load limits what the process gets.
- **CPU at rest**: process CPU time over wall time over N, nothing but timers running; in brackets with the cluster's clock frozen (memberlist and gRPC only): the difference is heartbeats, leases and anti-entropy.

`)
	fmt.Fprintf(&b, "Heap costs (medians over the sizes): on every node, per connection record in the swarm %.0f B, per session (its record and tools) %.0f B; a counter session costs its owner %.0f B more; "+
		"a gRPC link between two nodes (one connection, both ends, after a call) %.0f KiB, and a node holds both ends' worth per peer (it dials every peer and every peer dials it).\n\n", conn, session, actor, link/1024)
	for _, c := range charts {
		fmt.Fprintf(&b, "![%s](%s)\n\n", strings.TrimSuffix(c, ".svg"), c)
	}
	return b.String()
}

// reachP99 is the p99, and how many writes were answered without a
// node's acknowledgement (that node refusing until caught up).
func reachP99(res scale.Result) string {
	if res.Lagged == 0 {
		return ms(res.ReachP99)
	}
	return fmt.Sprintf("%s (%d lagging)", ms(res.ReachP99), res.Lagged)
}

func mib(b float64) float64 { return b / (1 << 20) }

func refused(n int64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d refused)", n)
}

func loads(rs []scale.Result) string {
	var s []string
	for _, r := range rs {
		s = append(s, fmt.Sprintf("%.1f (N=%d)", r.Load1, r.N))
	}
	return strings.Join(s, ", ")
}

func ms(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.0f ms", float64(d)/1e6)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// series is one line of a chart: a value per result.
type series struct {
	name string
	y    func(scale.Result) float64
}

// charts draws one line chart per cost against N into dir.
func (r report) charts(dir string) ([]string, error) {
	msf := func(d time.Duration) float64 { return float64(d) / 1e6 }
	specs := []struct {
		file, title, y string
		lines          []series
		target         float64
	}{
		{"scale-write.svg", "Per registry write, per peer (linear fan-out: flat)", "per peer", []series{
			{"bytes / 10", func(s scale.Result) float64 { return s.WriteBytes / float64(s.N-1) / 10 }},
			{"transport writes", func(s scale.Result) float64 { return s.WriteMsgs / float64(s.N-1) }},
		}, 0},
		{"scale-reach.svg", "A write reaches every node (target at N = 64: p99 ≤ 250 ms)", "ms", []series{
			{"p99 alone (clock frozen)", func(s scale.Result) float64 { return msf(s.AloneP99) }},
			{"p50 at rest", func(s scale.Result) float64 { return msf(s.RestReachP50) }},
			{"p99 at rest", func(s scale.Result) float64 { return msf(s.RestReachP99) }},
			{"p50 under load", func(s scale.Result) float64 { return msf(s.ReachP50) }},
			{"p99 under load", func(s scale.Result) float64 { return msf(s.ReachP99) }},
		}, 250},
		{"scale-join.svg", "Join catch-up and dead node hidden (target: catch-up ≤ 5 s)", "ms", []series{
			{"join catch-up", func(s scale.Result) float64 { return msf(s.CatchUp) }},
			{"dead node hidden", func(s scale.Result) float64 { return msf(s.Hidden) }},
		}, 0},
		{"scale-heap.svg", "Heap per node at rest", "MiB", []series{
			{"heap / node", func(s scale.Result) float64 { return s.HeapPerNode / (1 << 20) }},
			{"the swarm's records", func(s scale.Result) float64 { return mib(r.records(s)) }},
			{"peer links", func(s scale.Result) float64 { return mib(r.links(s)) }},
			{"the rest", func(s scale.Result) float64 { return mib(r.residual(s)) }},
		}, 0},
		{"scale-approvals.svg", "Approvals per second (decided by each state's two holders)", "approvals/s", []series{
			{"approvals/s", func(s scale.Result) float64 { return s.Approvals }},
		}, 0},
		{"scale-cpu.svg", "CPU per node (in-process, shared cores)", "% of a core", []series{
			{"under load", func(s scale.Result) float64 { return 100 * s.LoadCPU }},
			{"at rest, timers running", func(s scale.Result) float64 { return 100 * s.RestCPU }},
			{"at rest, cluster clock frozen", func(s scale.Result) float64 { return 100 * s.RestCPUFrozen }},
		}, 0},
		{"scale-rest.svg", "Messages a node sends at rest", "messages per second", []series{
			{"gRPC (heartbeats, acknowledgements, anti-entropy)", func(s scale.Result) float64 { return s.RestGRPC }},
			{"gossip (memberlist)", func(s scale.Result) float64 { return s.RestGossip }},
		}, 0},
	}
	var names []string
	for _, s := range specs {
		if err := r.lineChart(filepath.Join(dir, s.file), s.title, s.y, s.lines, s.target); err != nil {
			return nil, fmt.Errorf("drawing %s: %w", s.file, err)
		}
		names = append(names, s.file)
	}
	return names, nil
}

func (r report) lineChart(path, title, ylabel string, lines []series, target float64) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.X.Label.Text = "nodes (N)"
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	for i, l := range lines {
		xy := make(plotter.XYs, len(r.Results))
		for j, res := range r.Results {
			xy[j] = plotter.XY{X: float64(res.N), Y: l.y(res)}
		}
		line, points, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		line.Color, points.Color = plotutil.Color(i), plotutil.Color(i)
		points.Shape = plotutil.Shape(i)
		p.Add(line, points)
		p.Legend.Add(l.name, line, points)
	}
	if target > 0 && len(r.Results) > 0 {
		last := float64(r.Results[len(r.Results)-1].N)
		t, err := plotter.NewLine(plotter.XYs{{X: 0, Y: target}, {X: last, Y: target}})
		if err != nil {
			return err
		}
		t.Color = color.Gray{Y: 120}
		t.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(t)
		p.Legend.Add("target", t)
	}
	p.X.Min, p.Y.Min = 0, 0
	return p.Save(8*vg.Inch, 3.6*vg.Inch, path)
}

// perApproval is the spent-state entries the swarm holds per approval
// ("–" when none was approved).
func perApproval(res scale.Result) string {
	if res.Approved == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", float64(res.SpentHeld)/float64(res.Approved))
}
