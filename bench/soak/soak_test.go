package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm/bench/internal/rpcwire"
)

func TestPercentileIsTheNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := percentile(ds, c.q); got != c.want {
			t.Errorf("percentile(1..100 ms, %v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := percentile(nil, 0.99); got != 0 {
		t.Errorf("percentile of nothing = %v, want 0", got)
	}
}

func TestWithinIsTenPercentEitherWay(t *testing.T) {
	for _, c := range []struct {
		v, base int64
		want    bool
	}{{110, 100, true}, {111, 100, false}, {90, 100, true}, {89, 100, false}, {100, 100, true}} {
		if got := within(c.v, c.base, 0.10); got != c.want {
			t.Errorf("within(%d, %d, 10%%) = %v, want %v", c.v, c.base, got, c.want)
		}
	}
}

func TestParseGaugeFindsTheUnlabelledSample(t *testing.T) {
	text := "# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines_total 7\ngo_goroutines 53\n" +
		"go_memstats_heap_inuse_bytes 1.1534336e+07\n"
	if g, err := parseGauge([]byte(text), "go_goroutines"); err != nil || g != 53 {
		t.Errorf("go_goroutines = %d, %v; want 53", g, err)
	}
	if h, err := parseGauge([]byte(text), "go_memstats_heap_inuse_bytes"); err != nil || h != 11534336 {
		t.Errorf("heap = %d, %v; want 11534336", h, err)
	}
	if _, err := parseGauge([]byte(text), "absent"); err == nil {
		t.Error("a missing metric parsed")
	}
}

func TestStatusKB(t *testing.T) {
	status := "Name:\tmcpswarm\nVmRSS:\t   40488 kB\nRssAnon:\t   18000 kB\nRssFile:\t   22488 kB\n"
	for key, want := range map[string]int64{"VmRSS": 40488, "RssAnon": 18000, "RssFile": 22488} {
		if got, err := statusKB([]byte(status), key); err != nil || got != want {
			t.Errorf("%s = %d, %v; want %d", key, got, err, want)
		}
	}
	if _, err := statusKB([]byte("VmRSS: 12 MB\n"), "VmRSS"); err == nil {
		t.Error("a line in another unit parsed")
	}
}

func TestSpliceReplacesOnlyItsSection(t *testing.T) {
	doc := "# Benchmarks\n\nkept\n"
	once, err := splice(doc, "first\n")
	if err != nil {
		t.Fatal(err)
	}
	twice, err := splice(once+"after\n", "second\n")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(twice, doc) || !strings.Contains(twice, "second\n") || strings.Contains(twice, "first") || !strings.HasSuffix(twice, "after\n") {
		t.Errorf("splice lost or kept the wrong text:\n%s", twice)
	}
	if _, err := splice(endMark+"\n"+beginMark+"\n", "x"); err == nil {
		t.Error("reversed markers were accepted")
	}
}

func TestSessionIDsFitTheSwarmStartPattern(t *testing.T) {
	// swarm_start takes ^[a-z][a-z0-9]{0,6}$.
	for _, c := range []struct{ idx, seq int }{{0, 1}, {499, 46655}, {46655, 0}} {
		id := "s" + base36(c.idx, 3) + base36(c.seq%46656, 3)
		if len(id) != 7 || strings.ToLower(id) != id {
			t.Errorf("client %d cycle %d: id %q", c.idx, c.seq, id)
		}
	}
}

func TestOnlyNotYetReplicatedAnswersAreExpected(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&toolError{Text: `session "s00a001" is not running (or is not yours)`}, true},
		{fmt.Errorf("wrapped: %w", &rpcwire.Error{Code: -32602, Message: "tool 's00a001.inc.click' not found"}), true},
		{&toolError{Text: `session "s08j001" has no tool "s08j001.inc.click" (the widget may have left the view)`}, true},
		{&toolError{Text: "the counter is at its bound"}, false},
		{&httpError{Status: 503, Body: "draining"}, false},
		{errors.New("connection reset by peer"), false},
	} {
		if got := notYetReplicated(c.err); got != c.want {
			t.Errorf("notYetReplicated(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestKnobsFromTheEnvironment(t *testing.T) {
	t.Setenv("SOAK_CLIENTS", "50")
	t.Setenv("SOAK_DURATION", "60s")
	k, err := envKnobs()
	if err != nil || k.clients != 50 || k.duration != time.Minute {
		t.Fatalf("envKnobs = %+v, %v", k, err)
	}
	t.Setenv("SOAK_CLIENTS", "lots")
	if _, err := envKnobs(); err == nil || !strings.Contains(err.Error(), "SOAK_CLIENTS") {
		t.Errorf("a bad SOAK_CLIENTS gave %v", err)
	}
}

// A node behind a peer answers 503 with Retry-After; the client asks again
// after it and counts the answer as expected. A 503 without Retry-After
// (e.g. a draining node) is returned as it is.
func TestBehindAnswersAreRetriedAfterRetryAfter(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 1, 2:
			w.Header().Set("Retry-After", "0")
			http.Error(w, "connection cannot be served by this node yet", http.StatusServiceUnavailable)
		case 3:
			http.Error(w, "draining", http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	defer srv.Close()
	var behind atomic.Int64
	c := &conn{hc: srv.Client(), token: "t", behind: &behind}
	_, _, err := c.post(context.Background(), srv.URL, "notifications/initialized", nil, false)
	var he *httpError
	if !errors.As(err, &he) || he.Status != http.StatusServiceUnavailable || behind.Load() != 2 {
		t.Fatalf("post = %v after %d requests, %d counted behind; want the draining 503 after 2 retried", err, n.Load(), behind.Load())
	}
	if _, _, err := c.post(context.Background(), srv.URL, "notifications/initialized", nil, false); err != nil {
		t.Fatalf("the next post: %v", err)
	}
}
