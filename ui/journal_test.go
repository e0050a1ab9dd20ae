package ui

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// TestFullQueueWarnsOncePerIntervalNotPerCall pins that a sustained
// overload of the action journal costs one warning per interval with a
// count, not one log line per tool call (which measured 3.5% of a node's CPU
// under a 16-client click load).
func TestFullQueueWarnsOncePerIntervalNotPerCall(t *testing.T) {
	var buf bytes.Buffer
	j := &Journal{
		log:       slog.New(slog.NewTextHandler(&buf, nil)),
		queue:     make(chan entry), // nobody reads: always full
		warnEvery: rate.Sometimes{First: 1, Interval: time.Hour},
	}
	for range 1000 {
		j.enqueue(entry{action: Action{Session: "s1"}})
	}
	if n := strings.Count(buf.String(), "queue full"); n != 1 {
		t.Fatalf("%d warnings for 1000 dropped entries, want 1:\n%s", n, buf.String())
	}
	if j.dropped != 999 {
		t.Fatalf("dropped = %d after the first warning, want 999 still counted", j.dropped)
	}
}
