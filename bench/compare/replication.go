package main

import "fmt"

// p50Gap is a's p50 minus b's at one client, taken round by round, in µs.
func (r *report) p50Gap(a, b string) span {
	var xs []float64
	for _, c := range r.Cells {
		if c.Series != a || c.Conc != 1 {
			continue
		}
		if d, ok := r.find(c.Round, 1, b); ok {
			xs = append(xs, c.P50us-d.P50us)
		}
	}
	return spanOf(xs)
}

// extraRoundTrips is how many peer round trips the replicated click's p50
// at one client exceeds the same click's in `process` mode, round by
// round, each against the round trip measured in the same round.
func (r *report) extraRoundTrips() span {
	var xs []float64
	for _, c := range r.Cells {
		if c.Series != "replica" || c.Conc != 1 {
			continue
		}
		p, ok1 := r.find(c.Round, 1, "process")
		t, ok2 := r.find(c.Round, 1, rttSeries)
		if ok1 && ok2 && t.P50us > 0 {
			xs = append(xs, (c.P50us-p.P50us)/t.P50us)
		}
	}
	return spanOf(xs)
}

// fmtSpan prints a plain span: "0.64 (0.60–0.70)".
func fmtSpan(s span) string {
	if s.Lo == s.Hi {
		return fmtNum(s.Med)
	}
	return fmt.Sprintf("%s (%s–%s)", fmtNum(s.Med), fmtNum(s.Lo), fmtNum(s.Hi))
}

// replicationSection writes what a standby costs a click: `replica`
// against `process` at every concurrency, and at one client the extra p50
// in peer round trips.
func (r *report) replicationSection(w func(string, ...any)) {
	w("\nReplicated click (`replica`: session on A, its standby on B) against the same click in `process` mode on P of a " +
		"two-node cluster with no standbys (same round; CPU is A+B against P+Q), which is what a standby costs:\n\n")
	w("| clients | throughput | p50 | p99 | CPU per call |\n|---|---|---|---|---|\n")
	for _, c := range r.Conc {
		w("| %d | %s | %s | %s | %s |\n", c, fmtRatio(r.ratio("replica", "process", c, mTput)),
			fmtRatio(r.ratio("replica", "process", c, mP50)), fmtRatio(r.ratio("replica", "process", c, mP99)),
			fmtRatio(r.ratio("replica", "process", c, mCPU)))
	}
	if !r.hasConc(1) {
		return
	}
	gap := r.p50Gap("replica", "process")
	w("\nAt 1 client `replica`'s p50 exceeds `process`'s by %s µs (median over rounds, range), against one peer round trip of %s µs: "+
		"%s round trips. The round trip is the p50 of a gRPC health check on node B's gRPC port over one kept-open plaintext "+
		"connection (`rtt`), measured in each round beside the series: the replicated click adds one gRPC message each way "+
		"between two nodes on this loopback (the snapshot on the owner's long-lived `HoldStream` to its standby, the standby's "+
		"write(2), its acknowledgement), and a health check is that transport with no work behind it. The `forward` series' extra latency is not used: it adds B's MCP front work "+
		"to the hop (`forward` − `replica` at 1 client, the same owner reached through B: %s µs).\n",
		fmtSpan(gap), fmtSpan(r.value(rttSeries, 1, mP50)), fmtSpan(r.extraRoundTrips()), fmtSpan(r.p50Gap("forward", "replica")))
}
