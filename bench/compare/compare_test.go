package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with spaces and a ')' must not shift the fields.
	line := "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 9 0 100 0 0\n"
	got, err := parseStatCPU([]byte(line))
	if err != nil || got != 325 {
		t.Fatalf("parseStatCPU = %d, %v; want 325 (utime 250 + stime 75)", got, err)
	}
	if _, err := parseStatCPU([]byte("4242 (x) S 1 2")); err == nil {
		t.Fatal("a truncated stat line parsed without error")
	}
	if _, err := parseStatCPU([]byte("no name here")); err == nil {
		t.Fatal("a stat line without a command name parsed without error")
	}
}

func TestParseStatusRSS(t *testing.T) {
	got, err := parseStatusRSS([]byte("Name:\tx\nVmPeak:\t 9 kB\nVmRSS:\t   12345 kB\nThreads: 3\n"))
	if err != nil || got != 12345 {
		t.Fatalf("parseStatusRSS = %d, %v; want 12345", got, err)
	}
	if _, err := parseStatusRSS([]byte("Name:\tx\n")); err == nil {
		t.Fatal("a status without VmRSS parsed without error")
	}
}

func TestPercentileAndMedian(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Microsecond)
	}
	if got := percentile(ds, 0.5); got != 50*time.Microsecond {
		t.Errorf("p50 of 1..100 µs = %v, want 50µs", got)
	}
	if got := percentile(ds, 0.99); got != 99*time.Microsecond {
		t.Errorf("p99 of 1..100 µs = %v, want 99µs", got)
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("p50 of nothing = %v", got)
	}
	if got := median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("median(3,1,2) = %v", got)
	}
	if got := median([]float64{4, 1, 2, 3}); got != 2.5 {
		t.Errorf("median(4,1,2,3) = %v", got)
	}
}

func TestRatioIsTakenRoundByRound(t *testing.T) {
	// Round 1 ran on a machine twice as busy: the per-round ratio stays
	// 0.5 although the medians of the raw figures would say otherwise.
	r := &report{Conc: []int{16}, Cells: []cell{
		{Round: 0, Conc: 16, Series: "mcpgo", Throughput: 1000},
		{Round: 0, Conc: 16, Series: "click", Throughput: 500},
		{Round: 1, Conc: 16, Series: "mcpgo", Throughput: 400},
		{Round: 1, Conc: 16, Series: "click", Throughput: 200},
		{Round: 2, Conc: 16, Series: "mcpgo", Throughput: 1000},
		{Round: 2, Conc: 16, Series: "click", Throughput: 600},
	}}
	got := r.ratio("click", "mcpgo", 16, mTput)
	if got.Med != 0.5 || got.Lo != 0.5 || got.Hi != 0.6 {
		t.Fatalf("ratio = %+v, want median 0.5 over 0.5–0.6", got)
	}
}

func TestSpliceKeepsTheRestOfTheDocument(t *testing.T) {
	doc := "# Benchmarks\n\nhand-written\n"
	once, err := splice(doc, "first\n")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(once, doc) || !strings.Contains(once, "first\n") {
		t.Fatalf("first splice lost text:\n%s", once)
	}
	twice, err := splice(once+"\ntrailing\n", "second\n")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(twice, "first") || !strings.Contains(twice, "second\n") ||
		!strings.HasPrefix(twice, doc) || !strings.HasSuffix(twice, "trailing\n") {
		t.Fatalf("second splice:\n%s", twice)
	}
	if _, err := splice(endMark+"\n"+beginMark, "x"); err == nil {
		t.Fatal("markers in the wrong order were accepted")
	}
}

func TestCheckFailsOnAFailedOrSilentSeries(t *testing.T) {
	ok := &report{Cells: []cell{{Series: "click", Conc: 1, Calls: 10}}}
	if err := ok.check(); err != nil {
		t.Fatalf("a clean run failed the check: %v", err)
	}
	for _, c := range []cell{{Series: "click", Conc: 1, Calls: 10, Errors: 1, FirstError: "tool error"}, {Series: "forward", Conc: 16}} {
		if err := (&report{Cells: []cell{c}}).check(); err == nil || !strings.Contains(err.Error(), c.Series) {
			t.Errorf("check(%+v) = %v, want an error naming the series", c, err)
		}
	}
}

func TestExtraRoundTripsAreTakenRoundByRound(t *testing.T) {
	// Round 1's round trip is twice as slow, and so is its gap: both rounds
	// count the replicated click one round trip above `process`.
	r := &report{Conc: []int{1}, Cells: []cell{
		{Round: 0, Conc: 1, Series: "replica", P50us: 300},
		{Round: 0, Conc: 1, Series: "process", P50us: 200},
		{Round: 0, Conc: 1, Series: rttSeries, P50us: 100},
		{Round: 1, Conc: 1, Series: "replica", P50us: 600},
		{Round: 1, Conc: 1, Series: "process", P50us: 400},
		{Round: 1, Conc: 1, Series: rttSeries, P50us: 200},
	}}
	if got := r.extraRoundTrips(); got.Med != 1 || got.Lo != 1 || got.Hi != 1 {
		t.Fatalf("extra round trips = %+v, want 1 in both rounds", got)
	}
	if got := r.p50Gap("replica", "process"); got.Lo != 100 || got.Hi != 200 {
		t.Fatalf("p50 gap = %+v, want 100–200 µs", got)
	}
	var met bool
	for _, tg := range r.targets() {
		if strings.Contains(tg.what, "peer round trip") {
			met = tg.met
		}
	}
	if !met {
		t.Fatal("a gap of exactly one round trip failed the #36 target")
	}
}
