package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mcpswarm/mcpswarm/bench/internal/hostinfo"
)

// report is everything one run measured.
type report struct {
	Started time.Time        `json:"started"`
	Source  string           `json:"source"` // git describe of the tree mcpswarm was built from
	Elapsed string           `json:"elapsed"`
	Options string           `json:"options"`
	Machine hostinfo.Machine `json:"machine"`
	Series  []seriesInfo     `json:"series"`
	Conc    []int            `json:"concurrency"`
	Cells   []cell           `json:"cells"`
	Memory  []memFig         `json:"memory"`
	Startup []startupFig     `json:"startup"`
}

// startupFig is the time from exec to the first 200 on /healthz.
type startupFig struct {
	Server string  `json:"server"`
	Ms     float64 `json:"ms"`
}

// span is a median with the range it came from.
type span struct{ Med, Lo, Hi float64 }

func spanOf(xs []float64) span {
	if len(xs) == 0 {
		return span{}
	}
	s := span{Med: median(xs), Lo: xs[0], Hi: xs[0]}
	for _, x := range xs {
		s.Lo, s.Hi = min(s.Lo, x), max(s.Hi, x)
	}
	return s
}

// metric picks one figure of a cell.
type metric func(cell) float64

var (
	mTput metric = func(c cell) float64 { return c.Throughput }
	mP50  metric = func(c cell) float64 { return c.P50us }
	mP99  metric = func(c cell) float64 { return c.P99us }
	mCPU  metric = func(c cell) float64 { return c.CPUus }
)

// find returns the cell of (round, conc, series).
func (r *report) find(round, conc int, series string) (cell, bool) {
	for _, c := range r.Cells {
		if c.Round == round && c.Conc == conc && c.Series == series {
			return c, true
		}
	}
	return cell{}, false
}

// value is a series' figure across rounds at one concurrency.
func (r *report) value(series string, conc int, m metric) span {
	var xs []float64
	for _, c := range r.Cells {
		if c.Series == series && c.Conc == conc {
			xs = append(xs, m(c))
		}
	}
	return spanOf(xs)
}

// ratio is num's figure over den's, taken round by round (both measured
// moments apart under the same machine load), across rounds.
func (r *report) ratio(num, den string, conc int, m metric) span {
	var xs []float64
	for _, c := range r.Cells {
		if c.Series != num || c.Conc != conc {
			continue
		}
		d, ok := r.find(c.Round, conc, den)
		if !ok || m(d) == 0 {
			continue
		}
		xs = append(xs, m(c)/m(d))
	}
	return spanOf(xs)
}

// errors is the count of failed calls of a series at one concurrency.
func (r *report) errors(series string, conc int) (n int, first string) {
	for _, c := range r.Cells {
		if c.Series == series && c.Conc == conc {
			n += c.Errors
			if first == "" {
				first = c.FirstError
			}
		}
	}
	return n, first
}

func (r *report) memOf(server string) (memFig, bool) {
	for _, m := range r.Memory {
		if m.Server == server {
			return m, true
		}
	}
	return memFig{}, false
}

func (r *report) hasConc(c int) bool {
	for _, x := range r.Conc {
		if x == c {
			return true
		}
	}
	return false
}

// fmtRatio prints a ratio span: "0.64× (0.60–0.70)".
func fmtRatio(s span) string {
	if s.Lo == s.Hi {
		return fmt.Sprintf("%.2f×", s.Med)
	}
	return fmt.Sprintf("%.2f× (%.2f–%.2f)", s.Med, s.Lo, s.Hi)
}

func fmtNum(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.2f", x)
	}
}

// markdown renders the report; charts are the SVG file names to embed.
func (r *report) markdown(charts []string) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("## Side by side: mcpswarm against the servers users would pick instead\n\n")
	w("Written by `make bench-compare` (`bench/compare`) on %s from source %s: %s. %d CPUs (%s), %s; "+
		"1-minute load %s before, %s after; the run took %s. The machine is shared, so read the **ratios**: each is taken "+
		"between two series measured moments apart in the same round, and shown as the median over rounds with the range.\n\n",
		r.Started.Format("2006-01-02 15:04 UTC"), r.Source, r.Options, r.Machine.CPUs, r.Machine.CPUModel, r.Machine.GoVersion,
		r.Machine.LoadBefore, r.Machine.LoadAfter, r.Elapsed)
	w("Every server is its own process on loopback, driven by the same Go client code (one keep-alive connection and one MCP " +
		"connection per client, protocol 2025-11-25, each client calling in a loop). CPU per call is the servers' own " +
		"utime+stime from `/proc/PID/stat` over the window divided by the calls answered (both nodes for the forwarded series); " +
		"the load generator runs on the same cores.\n\n")
	w("Series:\n\n")
	for _, s := range r.Series {
		w("- `%s`: %s\n", s.Key, s.Label)
	}
	w("\n")
	for _, c := range r.Conc {
		w("### %d client(s)\n\n", c)
		w("| series | calls/s | ÷ bare | p50 µs | ÷ bare | p99 µs | ÷ bare | server CPU µs/call | ÷ bare | failed calls |\n")
		w("|---|---|---|---|---|---|---|---|---|---|\n")
		for _, s := range r.Series {
			n, first := r.errors(s.Key, c)
			errs := fmt.Sprint(n)
			if first != "" {
				errs += " (" + strings.ReplaceAll(first, "|", "/") + ")"
			}
			w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.Key,
				fmtNum(r.value(s.Key, c, mTput).Med), fmtRatio(r.ratio(s.Key, baseline, c, mTput)),
				fmtNum(r.value(s.Key, c, mP50).Med), fmtRatio(r.ratio(s.Key, baseline, c, mP50)),
				fmtNum(r.value(s.Key, c, mP99).Med), fmtRatio(r.ratio(s.Key, baseline, c, mP99)),
				fmtNum(r.value(s.Key, c, mCPU).Med), fmtRatio(r.ratio(s.Key, baseline, c, mCPU)),
				errs)
		}
		w("\n")
	}
	w("Forwarded against local click (same round; CPU is A+B against one node):\n\n")
	w("| clients | series | throughput | p50 | p99 | CPU per call |\n|---|---|---|---|---|---|\n")
	for _, c := range r.Conc {
		for _, k := range []string{"forward", "spread"} {
			w("| %d | %s | %s | %s | %s | %s |\n", c, k, fmtRatio(r.ratio(k, "click", c, mTput)),
				fmtRatio(r.ratio(k, "click", c, mP50)), fmtRatio(r.ratio(k, "click", c, mP99)),
				fmtRatio(r.ratio(k, "click", c, mCPU)))
		}
	}
	r.replicationSection(w)
	w("\nThe same click on a node that also holds the memory test's idle connections and sessions (`crowded`), against a fresh node (`click`), same round:\n\n")
	w("| clients | throughput | p50 | p99 | CPU per call |\n|---|---|---|---|---|\n")
	for _, c := range r.Conc {
		w("| %d | %s | %s | %s | %s |\n", c, fmtRatio(r.ratio("crowded", "click", c, mTput)),
			fmtRatio(r.ratio("crowded", "click", c, mP50)), fmtRatio(r.ratio("crowded", "click", c, mP99)),
			fmtRatio(r.ratio("crowded", "click", c, mCPU)))
	}
	w("\nMemory, by RSS (`/proc/PID/status` VmRSS) growth after opening idle MCP connections (initialize + initialized; " +
		"the TCP connections are then closed) and then starting one `counter` session on each; one sample per server, " +
		"so garbage not yet collected is part of the figure:\n\n")
	w("| server | idle connections | RSS before | KB per idle connection | ÷ mcp-go | KB per idle `counter` session | start-up to /healthz |\n|---|---|---|---|---|---|---|\n")
	bare, _ := r.memOf("mcp-go")
	for _, m := range r.Memory {
		sess := "—"
		if m.PerSessionKB != 0 {
			sess = fmtNum(m.PerSessionKB)
		}
		ratio := "—"
		if bare.PerConnKB > 0 {
			ratio = fmt.Sprintf("%.2f×", m.PerConnKB/bare.PerConnKB)
		}
		start := "—"
		for _, s := range r.Startup {
			if s.Server == m.Server || strings.HasPrefix(s.Server, m.Server) {
				start = fmt.Sprintf("%.1f ms", s.Ms)
			}
		}
		w("| %s | %d | %.1f MB | %s | %s | %s | %s |\n", m.Server, m.Idle, float64(m.BaseKB)/1024, fmtNum(m.PerConnKB), ratio, sess, start)
	}
	w("\nTargets of issues #17 and #36 (ratios from this run):\n\n| target | measured | met |\n|---|---|---|\n")
	for _, t := range r.targets() {
		met := "no"
		if t.met {
			met = "yes"
		}
		w("| %s | %s | %s |\n", t.what, t.got, met)
	}
	w("\n")
	for _, c := range charts {
		w("![%s](bench/%s)\n\n", strings.TrimSuffix(c, ".svg"), c)
	}
	if len(charts) > 0 { // written to docs, not printed
		w("Raw cells: [compare.json](bench/compare.json). Method and hot spots: [compare.md](bench/compare.md). " +
			"Quick smoke run: `make bench-compare QUICK=1` (prints, writes nothing).\n")
	}
	return b.String()
}

// has reports whether the run measured series key.
func (r *report) has(key string) bool {
	return slices.ContainsFunc(r.Series, func(s seriesInfo) bool { return s.Key == key })
}

// target is one of the goals checked against this run.
type target struct {
	what, got string
	met       bool
}

func (r *report) targets() []target {
	var ts []target
	if r.hasConc(16) {
		t := r.ratio("click", baseline, 16, mTput)
		ts = append(ts, target{"local click throughput at 16 clients ≥ 0.67× bare", fmtRatio(t), t.Med >= 0.67})
		c := r.ratio("click", baseline, 16, mCPU)
		ts = append(ts, target{"local click CPU per call at 16 clients ≤ 1.5× bare", fmtRatio(c), c.Med <= 1.5})
		if r.has("mcpgo-durable") {
			d := r.ratio("mcpgo-durable", baseline, 16, mTput)
			ts = append(ts, target{"#37: local click (the default durability: answered after fdatasync) at 16 clients ≥ 0.6× bare",
				fmt.Sprintf("%s; the ceiling, bare mcp-go with the same durable write (`mcpgo-durable`): %s", fmtRatio(t), fmtRatio(d)), t.Med >= 0.6})
		}
		s := r.ratio("static", baseline, 16, mTput)
		ts = append(ts, target{"static tool throughput at 16 clients ≥ 0.9× bare", fmtRatio(s), s.Med >= 0.9})
		f := r.ratio("spread", "click", 16, mTput)
		ts = append(ts, target{"forwarded click throughput at 16 clients, clients spread over both nodes, ≥ 0.6× local", fmtRatio(f), f.Med >= 0.6})
		for _, k := range []string{"static", "click", "forward", "spread"} {
			g := r.ratio(k, "gosdk", 16, mTput)
			ts = append(ts, target{fmt.Sprintf("`%s` ahead of go-sdk at 16 clients (throughput)", k), fmtRatio(g), g.Med > 1})
		}
	}
	if r.hasConc(64) {
		p := r.ratio("click", baseline, 64, mP99)
		ts = append(ts, target{"local click p99 at 64 clients ≤ 2× bare", fmtRatio(p), p.Med <= 2})
	}
	if r.hasConc(1) {
		p := r.ratio("forward", "click", 1, mP50)
		ts = append(ts, target{"forwarded click p50 at 1 client ≤ 1.5× local", fmtRatio(p), p.Med <= 1.5})
		if x := r.extraRoundTrips(); x.Med != 0 || x.Hi != 0 {
			ts = append(ts, target{"#36: `replica` click p50 at 1 client ≤ `process` p50 + one peer round trip",
				fmt.Sprintf("+%s µs = %s round trips (one round trip: %s µs)", fmtNum(r.p50Gap("replica", "process").Med), fmtSpan(x), fmtNum(r.value(rttSeries, 1, mP50).Med)), x.Med <= 1})
		}
	}
	bare, ok1 := r.memOf("mcp-go")
	for _, m := range r.Memory {
		if !strings.HasPrefix(m.Server, "mcpswarm") {
			continue
		}
		if ok1 && bare.PerConnKB > 0 {
			x := m.PerConnKB / bare.PerConnKB
			ts = append(ts, target{"idle connection ≤ 1.1× mcp-go's", fmt.Sprintf("%.2f× (%s KB vs %s KB)", x, fmtNum(m.PerConnKB), fmtNum(bare.PerConnKB)), x <= 1.1})
		}
		ts = append(ts, target{"idle `counter` session ≤ 16 KB", fmtNum(m.PerSessionKB) + " KB", m.PerSessionKB <= 16})
	}
	return ts
}

// check fails when a series answered no call or failed any, so a smoke
// run catches a series that stopped working.
func (r *report) check() error {
	var bad []string
	for _, c := range r.Cells {
		if c.Calls == 0 || c.Errors > 0 {
			bad = append(bad, fmt.Sprintf("%s at %d clients (round %d): %d calls, %d failed %s", c.Series, c.Conc, c.Round, c.Calls, c.Errors, c.FirstError))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%d measurements failed:\n%s", len(bad), strings.Join(bad, "\n"))
	}
	return nil
}

const (
	beginMark = "<!-- bench-compare:begin (written by make bench-compare; edits inside are overwritten) -->"
	endMark   = "<!-- bench-compare:end -->"
)

// splice puts section between the markers of doc, or appends it with the
// markers when doc has none, leaving everything else as it was.
func splice(doc, section string) (string, error) {
	block := beginMark + "\n" + section + endMark + "\n"
	i := strings.Index(doc, beginMark)
	j := strings.Index(doc, endMark)
	switch {
	case i < 0 && j < 0:
		if !strings.HasSuffix(doc, "\n") && doc != "" {
			doc += "\n"
		}
		return doc + "\n" + block, nil
	case i >= 0 && j > i:
		rest := doc[j+len(endMark):]
		rest = strings.TrimPrefix(rest, "\n")
		return doc[:i] + block + rest, nil
	default:
		return "", fmt.Errorf("the bench-compare markers are damaged (begin at %d, end at %d): fix them by hand", i, j)
	}
}

// write prints the report, or with a docs directory writes the charts, the
// raw cells and the section of BENCHMARKS.md.
func (r *report) write(docsDir string) error {
	if docsDir == "" {
		fmt.Print(r.markdown(nil))
		return nil
	}
	dir := filepath.Join(docsDir, "bench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	charts, err := r.charts(dir)
	if err != nil {
		return err
	}
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the cells: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "compare.json"), append(raw, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing compare.json: %w", err)
	}
	path := filepath.Join(docsDir, "BENCHMARKS.md")
	doc, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	out, err := splice(string(doc), r.markdown(charts))
	if err != nil {
		return fmt.Errorf("updating %s: %w", path, err)
	}
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	fmt.Printf("wrote %s, %s/compare.json and %d charts\n", path, dir, len(charts))
	return nil
}
