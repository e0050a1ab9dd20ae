package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/mcpswarm/mcpswarm/bench/internal/hostinfo"
)

// report is one realscale run: a result per timer set and size.
type report struct {
	Started  time.Time        `json:"started"`
	Machine  hostinfo.Machine `json:"machine"`
	Conns    int              `json:"conns_per_node"`
	Sessions int              `json:"sessions_per_node"`
	Writes   int              `json:"writes"`
	Rest     time.Duration    `json:"rest"`
	Results  []result         `json:"results"`
}

func (r report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# How the swarm grows: real processes\n\nRun %s by `make bench-scale-real` (`bench/realscale`) on %d cores (%s), load average %s before and %s after.\n\n",
		r.Started.Format("2006-01-02 15:04 UTC"), r.Machine.CPUs, r.Machine.CPUModel, r.Machine.LoadBefore, r.Machine.LoadAfter)
	fmt.Fprintf(&b, "N `mcpswarm serve` processes on one machine, `--session-replicas 0` (as the simulation: a dead node's sessions are hidden, not failed over). "+
		"Load per node: %d MCP connections left open, %d counter sessions, one principal. Reach: %d sessions started one at a time through random nodes. Rest: %v.\n\n",
		r.Conns, r.Sessions, r.Writes, r.Rest)
	b.WriteString("| timers | N | load: start / rest / reach / kill / approvals | bytes per peer: connection opened; session started | deltas per peer: connection; session | swarm_start answered p50 / p99 | session reaches every node p50 / p99 (max) | joiner ready; lists every session (a lone node's start) | dead node's sessions hidden: every node; median node | live heap / node | RSS / node | CPU / node at rest, median (max) | replication bytes/s / node at rest | approvals/s (refused) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, x := range r.Results {
		peers := float64(x.N - 1)
		fmt.Fprintf(&b, "| %s | %d | %s / %s / %s / %s / %s | %.0f; %.0f | %.1f; %.1f | %v / %v | %v / %v (%v) | %v; %v (%v) | %v; %v | %.1f MiB | %.1f MiB | %.2f %% (%.2f) | %.0f | %.0f (%d) |\n",
			x.Timers, x.N, x.Load1["start"], x.Load1["rest"], x.Load1["reach"], x.Load1["kill"], x.Load1["approve"],
			x.ConnBytes/peers, x.StartBytes/peers, x.ConnDeltas/peers, x.StartDeltas/peers,
			ms(x.AnswerP50), ms(x.AnswerP99), ms(x.ReachP50), ms(x.ReachP99), ms(x.ReachMax),
			ms(x.JoinReady), ms(x.JoinListed), ms(x.SeedReady), ms(x.Hidden), ms(x.HiddenP50),
			x.HeapMiB, x.RSSMiB, x.RestCPU, x.RestCPUMax, x.RestBytes, x.Approvals, x.Refused)
	}
	b.WriteString("\nThe largest size against the smallest, same timers (a ratio cancels much of what the machine's other load adds):\n\n")
	b.WriteString("| timers | N | bytes per peer per session | reach p50 | reach p99 | joiner ready | hidden everywhere | live heap / node | RSS / node | CPU at rest | approvals/s |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, t := range []string{"loopback", "lan"} {
		lo, hi, ok := r.span(t)
		if !ok {
			continue
		}
		ratio := func(a, b float64) string { return fmt.Sprintf("%.2f×", b/a) }
		dur := func(a, b time.Duration) string { return ratio(float64(a), float64(b)) }
		fmt.Fprintf(&b, "| %s | %d → %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", t, lo.N, hi.N,
			ratio(lo.StartBytes/float64(lo.N-1), hi.StartBytes/float64(hi.N-1)), dur(lo.ReachP50, hi.ReachP50), dur(lo.ReachP99, hi.ReachP99),
			dur(lo.JoinReady, hi.JoinReady), dur(lo.Hidden, hi.Hidden), ratio(lo.HeapMiB, hi.HeapMiB), ratio(lo.RSSMiB, hi.RSSMiB), ratio(lo.RestCPU, hi.RestCPU), ratio(lo.Approvals, hi.Approvals))
	}
	b.WriteString(`
- **bytes, deltas per peer**: ` + "`mcpswarm_cluster_bytes_sent_total`" + ` and ` + "`deltas_sent_total`" + ` summed over the nodes (encoded replication messages, without gRPC's framing) over the phase, less the rate at rest over its length, per connection opened or session started, over N−1. A session start writes its session and tools records; a connection its connection record.
- **answered**: the swarm_start call, from the harness; the owner answers once every live peer acknowledged the session's records.
- **reaches every node**: from the call until the last node's admin event stream reported the session, by the node's own event time.
- **joiner**: the (N+1)th process from exec until ` + "`/readyz`" + ` (joined, pulled from every live peer; polled every 20 ms), and until its admin API lists every session; in brackets node 1's exec until ready, alone: the part that is process start.
- **hidden**: from ` + "`kill -9`" + ` of node 2 until each live node reported every one of its sessions changed (hidden), by the nodes' event times; the admin API then lists none of them.
- **approvals/s**: one client per node (the joiner aside; the dead node gone: N−1 nodes, as in the simulation) clicks its own counter session's inc button, which the policy asks about, as a 2026-07-28 client: an input_required answer with a fresh request state, then the call again with it and an acceptance, which spends the state at the arbiter (the first live member) and clicks. Each approval is two HTTP requests and a tool call, not the arbiter's decision alone.
- **live heap**: ` + "`go_memstats_heap_alloc_bytes`" + ` right after a GC (pprof heap?gc=1); RSS from /proc; CPU: utime+stime from /proc over the rest, in % of one core.
`)
	return b.String()
}

// span is the smallest and largest size measured on timers t.
func (r report) span(t string) (lo, hi result, ok bool) {
	for _, x := range r.Results {
		if x.Timers != t {
			continue
		}
		if !ok || x.N < lo.N {
			lo = x
		}
		if !ok || x.N > hi.N {
			hi = x
		}
		ok = true
	}
	return lo, hi, ok && lo.N != hi.N
}

// ms rounds a duration for the table.
func ms(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= 10*time.Millisecond:
		return d.Round(time.Millisecond)
	default:
		return d.Round(100 * time.Microsecond)
	}
}
