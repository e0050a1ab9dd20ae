package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcpswarm/mcpswarm/bench/internal/hostinfo"
)

// report is everything one soak measured.
type report struct {
	Started time.Time        `json:"started"`
	Elapsed string           `json:"elapsed"`
	Knobs   string           `json:"knobs"`
	Machine hostinfo.Machine `json:"machine"`
	Nodes   []string         `json:"nodes"`
	// SessionReplicas is the nodes' --session-replicas (absent in runs from
	// before standbys existed).
	SessionReplicas int     `json:"session_replicas,omitempty"`
	Tolerance       float64 `json:"tolerance"`
	LoadSeconds     float64 `json:"load_seconds"`
	SettleSeconds   float64 `json:"settle_seconds"`

	Cycles       int64    `json:"cycles"` // sessions started, driven, verified, stopped
	Calls        int64    `json:"calls"`
	Clicks       int64    `json:"clicks_acknowledged"`
	Typed        int64    `json:"typed_acknowledged"`
	Verified     int64    `json:"sessions_verified"`
	LagRetries   int64    `json:"not_yet_replicated"`
	Behind       int64    `json:"expected_behind_retried"`
	Unexpected   int64    `json:"unexpected_errors"`
	UnexpectedEx []string `json:"unexpected_examples,omitempty"`
	Lost         int64    `json:"sessions_missing_writes"`
	LostEx       []string `json:"missing_write_examples,omitempty"`
	P50ms        float64  `json:"p50_ms"`
	P99ms        float64  `json:"p99_ms"`
	MaxMs        float64  `json:"max_ms"`
	PeakRSSKB    []int64  `json:"peak_rss_kb"`
	PeakGor      []int64  `json:"peak_goroutines"`

	WarmUnexpected int64    `json:"warmup_unexpected_errors"`
	WarmLost       int64    `json:"warmup_sessions_missing_writes"`
	WarmExamples   []string `json:"warmup_examples,omitempty"`

	Cold     []level  `json:"cold"` // before any load
	Baseline []level  `json:"baseline"`
	After    []level  `json:"after"`
	Dead     []string `json:"dead,omitempty"`
	Series   []sample `json:"series"`
}

func (r *report) fill(t *tally, lat *latencies) {
	r.Cycles, r.Calls, r.Clicks, r.Typed = t.cycles.Load(), t.calls.Load(), t.clicks.Load(), t.typed.Load()
	r.Verified, r.LagRetries = t.verified.Load(), t.lagRetries.Load()
	r.Behind = t.behind.Load()
	t.mu.Lock()
	r.Unexpected, r.UnexpectedEx, r.Lost, r.LostEx = t.nUnexp, t.unexpected, t.nLost, t.lost
	t.mu.Unlock()
	_, p50, p99, mx := lat.overall()
	r.P50ms, r.P99ms, r.MaxMs = ms(p50), ms(p99), ms(mx)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// failures lists every assertion that did not hold.
func (r *report) failures() []string {
	var f []string
	if r.Unexpected > 0 {
		f = append(f, fmt.Sprintf("%d unexpected errors, e.g. %s", r.Unexpected, strings.Join(r.UnexpectedEx, "; ")))
	}
	if r.Lost > 0 {
		f = append(f, fmt.Sprintf("%d sessions lacked an acknowledged write, e.g. %s", r.Lost, strings.Join(r.LostEx, "; ")))
	}
	if r.WarmUnexpected > 0 || r.WarmLost > 0 {
		f = append(f, fmt.Sprintf("warm-up: %d unexpected errors, %d sessions lacking a write, e.g. %s", r.WarmUnexpected, r.WarmLost, strings.Join(r.WarmExamples, "; ")))
	}
	if r.Cycles == 0 {
		f = append(f, "no session completed a cycle")
	}
	f = append(f, r.Dead...)
	if len(r.After) != len(r.Baseline) {
		f = append(f, "the settle phase took no measurement")
		return f
	}
	for i, b := range r.Baseline {
		a := r.After[i]
		if !within(a.Goroutines, b.Goroutines, r.Tolerance) {
			f = append(f, fmt.Sprintf("%s: %d goroutines after the load, baseline %d (more than %.0f%% apart)", b.Node, a.Goroutines, b.Goroutines, r.Tolerance*100))
		}
		if !within(a.RSSKB, b.RSSKB, r.Tolerance) {
			f = append(f, fmt.Sprintf("%s: RSS %.1f MiB after the load, baseline %.1f MiB (more than %.0f%% apart)", b.Node, mib(a.RSSKB), mib(b.RSSKB), r.Tolerance*100))
		}
	}
	return f
}

func mib(kb int64) float64 { return float64(kb) / 1024 }

func (k knobs) describe() string {
	return fmt.Sprintf("SOAK_CLIENTS=%d SOAK_DURATION=%v SOAK_THINK=%v SOAK_WARMUP=%v SOAK_BASELINE=%v SOAK_SETTLE=%v",
		k.clients, k.duration, k.think, k.warmup, k.baseline, k.settle)
}

// markdown is the report as the section of BENCHMARKS.md (and soak.md).
func (r *report) markdown(plot string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("## Soak: %s against three nodes\n\n", strings.Fields(r.Knobs)[0])
	p("Written by `make soak` (`bench/soak`; not part of CI) on %s (%d CPUs, %s, load average %s before and %s after), started %s, %s in all.\n",
		r.Machine.CPUModel, r.Machine.CPUs, r.Machine.GoVersion, r.Machine.LoadBefore, r.Machine.LoadAfter, r.Started.Format(time.RFC3339), r.Elapsed)
	p("Settings: `%s`.\n\n", r.Knobs)
	p("Three `bin/mcpswarm` processes on loopback")
	if r.SessionReplicas > 0 {
		p(", each started with `--session-replicas %d` (every session has a standby on another node, and a write is answered after "+
			"the standbys' acknowledgement: durability `replica`, the default with a standby)", r.SessionReplicas)
	}
	p("; a policy of one bearer token per client; " +
		"each client, its own principal, repeats: open an MCP connection (2025-11-25) on a random node, `swarm_start` a counter (3 in 4) or login session " +
		"through a random node, 3–12 `inc.click` or 2–6 `username.type_into` each through a random node, `swarm_get_model` through a random node, " +
		"`swarm_stop`, DELETE, each step after a random think time. One answer is expected: " +
		"a node answering 503 with Retry-After because it may lack a peer's latest writes (its lease on that peer lapsed; the client retries after the Retry-After, within 30 s). " +
		"Every other error is unexpected, a node that does not know the client's session or its tool yet included: a start and a call that changed the tool set " +
		"are answered only once every live peer has them.\n\n")
	verdict := "**every assertion held**"
	if fs := r.failures(); len(fs) > 0 {
		verdict = "**FAILED**: " + strings.Join(fs, "; ")
	}
	p("Verdict: %s.\n\n", verdict)
	p("| Figure | Value |\n|---|---|\n")
	p("| Load | %.0f s, %d session cycles, %d answered requests (%.0f/s) |\n", r.LoadSeconds, r.Cycles, r.Calls, float64(r.Calls)/max(r.LoadSeconds, 1))
	p("| Latency of answered requests | p50 %.1f ms, p99 %.1f ms, max %.0f ms |\n", r.P50ms, r.P99ms, r.MaxMs)
	p("| Unexpected errors | %d |\n", r.Unexpected)
	p("| Of those, a session or tool the node asked did not know yet | %d |\n", r.LagRetries)
	p("| Expected answers (503 Retry-After from a node behind a peer, retried) | %d |\n", r.Behind)
	p("| Acknowledged writes | %d clicks, %d typed texts |\n", r.Clicks, r.Typed)
	p("| Sessions read back with every acknowledged write | %d; missing a write: %d |\n", r.Verified, r.Lost)
	p("| Settle: back within %.0f%% after | %.0f s (median of the last %d one-second samples) |\n\n", r.Tolerance*100, r.SettleSeconds, settleWindow)
	p("| Node | Goroutines: baseline → peak → after | RSS MiB: baseline → peak → after |\n|---|---|---|\n")
	for i, base := range r.Baseline {
		var a level
		if i < len(r.After) {
			a = r.After[i]
		}
		p("| %s | %d → %d → %d (%+.1f%%) | %.1f → %.1f → %.1f (%+.1f%%) |\n", base.Node,
			base.Goroutines, r.PeakGor[i], a.Goroutines, pct(a.Goroutines, base.Goroutines),
			mib(base.RSSKB), mib(r.PeakRSSKB[i]), mib(a.RSSKB), pct(a.RSSKB, base.RSSKB))
	}
	if r.Cycles > 0 && len(r.After) == len(r.Baseline) {
		p("\nGo heap in use (`go_memstats_heap_inuse_bytes`), MiB, baseline → after, and what stayed per completed load cycle (one connection and one session):")
		for i, base := range r.Baseline {
			a := r.After[i]
			p(" %s %.1f → %.1f (%.1f KiB/cycle);", base.Node, mib(base.HeapKB), mib(a.HeapKB), float64(a.HeapKB-base.HeapKB)/float64(r.Cycles))
		}
		p("\n")
	}
	p("\nRSS in parts, MiB, anonymous (heap, stacks) + file-backed (code, the bbolt mmap): cold (before any load) → baseline (after the warm-up and a rest) → after the load and the settle.\n\n")
	p("| Node | Goroutines cold | RSS cold | RSS baseline | RSS after |\n|---|---|---|---|---|\n")
	for i, base := range r.Baseline {
		var a, c level
		if i < len(r.After) {
			a = r.After[i]
		}
		if i < len(r.Cold) {
			c = r.Cold[i]
		}
		p("| %s | %d | %.1f + %.1f | %.1f + %.1f | %.1f + %.1f |\n", base.Node, c.Goroutines,
			mib(c.AnonKB), mib(c.FileKB), mib(base.AnonKB), mib(base.FileKB), mib(a.AnonKB), mib(a.FileKB))
	}
	if plot != "" {
		p("\n![RSS, goroutines and p99 per second](bench/%s)\n", plot)
	}
	p("\nRaw per-second series: [`bench/soak.json`](bench/soak.json).\n\n")
	return b.String()
}

func pct(v, base int64) float64 {
	if base == 0 {
		return 0
	}
	return float64(v-base) / float64(base) * 100
}

func (r *report) peaks() {
	r.PeakRSSKB, r.PeakGor = make([]int64, len(r.Nodes)), make([]int64, len(r.Nodes))
	for _, s := range r.Series {
		for i := range r.Nodes {
			r.PeakRSSKB[i], r.PeakGor[i] = max(r.PeakRSSKB[i], s.RSSKB[i]), max(r.PeakGor[i], s.Goroutines[i])
		}
	}
}

const (
	beginMark = "<!-- soak:begin (written by make soak; edits inside are overwritten) -->"
	endMark   = "<!-- soak:end -->"
)

// splice puts section between the markers of doc, or appends it with the
// markers when doc has none, leaving everything else as it was.
func splice(doc, section string) (string, error) {
	block := beginMark + "\n" + section + endMark + "\n"
	i, j := strings.Index(doc, beginMark), strings.Index(doc, endMark)
	switch {
	case i < 0 && j < 0:
		if doc != "" && !strings.HasSuffix(doc, "\n") {
			doc += "\n"
		}
		return doc + "\n" + block, nil
	case i >= 0 && j > i:
		return doc[:i] + block + strings.TrimPrefix(doc[j+len(endMark):], "\n"), nil
	default:
		return "", fmt.Errorf("the soak markers are damaged (begin at %d, end at %d): fix them by hand", i, j)
	}
}

// write prints the report, or with a docs directory writes the plot, the raw
// series, soak.md and the section of BENCHMARKS.md.
func (r *report) write(docsDir string) error {
	r.peaks()
	if r.Machine.LoadAfter == "" {
		r.Machine.LoadAfter = hostinfo.LoadAvg()
	}
	if docsDir == "" {
		fmt.Print(r.markdown(""))
		return nil
	}
	dir := filepath.Join(docsDir, "bench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	const plotFile = "soak.svg"
	if err := r.plot(filepath.Join(dir, plotFile)); err != nil {
		return fmt.Errorf("drawing %s: %w", plotFile, err)
	}
	raw, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return fmt.Errorf("encoding the report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "soak.json"), append(raw, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing soak.json: %w", err)
	}
	md := r.markdown(plotFile)
	if err := os.WriteFile(filepath.Join(dir, "soak.md"), []byte(strings.ReplaceAll(md, "](bench/", "](")), 0o644); err != nil {
		return fmt.Errorf("writing soak.md: %w", err)
	}
	path := filepath.Join(docsDir, "BENCHMARKS.md")
	doc, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	out, err := splice(string(doc), md)
	if err != nil {
		return fmt.Errorf("updating %s: %w", path, err)
	}
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	fmt.Print(md)
	fmt.Printf("wrote %s and %s/soak.{svg,json,md}\n", path, dir)
	return nil
}
