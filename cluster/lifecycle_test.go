package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm/internal/memnet"
)

// Every node of a cluster stopping at once (Ctrl-C on `make cluster`) is an
// ordinary shutdown: no Stop reports an error, although the last to leave
// has nobody left to hear its leave broadcast.
func TestConcurrentStopReportsNoError(t *testing.T) {
	nodes := startCluster(t, 3)
	awaitMembers(t, nodes, 10*time.Second)
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			errs[i] = n.c.Stop(ctx)
			n.killed = true
			n.srv.Stop()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("stopping %s: %v", nodes[i].name, err)
		}
	}
}

// A node whose only peer crashed a moment ago stops without an error: its
// leave broadcast has nobody to reach.
func TestStopAfterPeerCrashReportsNoError(t *testing.T) {
	nodes := startCluster(t, 2)
	awaitMembers(t, nodes, 10*time.Second)
	nodes[1].kill()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := nodes[0].c.Stop(ctx)
	nodes[0].killed = true
	nodes[0].srv.Stop()
	if err != nil {
		t.Fatalf("stopping after the peer crashed: %v", err)
	}
}

// The cluster logs through the logger it is given and adds no key the
// caller's logger may already carry: JSON log lines with a duplicate key
// break log pipelines.
func TestLogLinesHaveNoDuplicateKeys(t *testing.T) {
	var buf logBuf
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", "dup").With("component", "cluster")
	n := startNode(t, memnet.New(), "dup", "", func(c *Config) { c.Logger = log })
	n.stop()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) < 2 {
		t.Fatalf("expected the start and stop lines, got %q", buf.String())
	}
	for _, line := range lines {
		if k := duplicateKey(line); k != "" {
			t.Errorf("key %q appears twice in %s", k, line)
		}
	}
}

// duplicateKey returns a top-level key that occurs twice in a JSON object.
func duplicateKey(line string) string {
	dec := json.NewDecoder(strings.NewReader(line))
	if _, err := dec.Token(); err != nil {
		return ""
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		k, _ := tok.(string)
		if seen[k] {
			return k
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return ""
		}
	}
	return ""
}

// Every timer of DefaultConfig is set: a zero Reconnect made the reconnect
// loop run on the seed-retry tick alone.
func TestDefaultConfigSetsEveryTimer(t *testing.T) {
	c := DefaultConfig()
	for name, d := range map[string]time.Duration{
		"DeadGrace": c.DeadGrace, "BatchDelay": c.BatchDelay, "AntiEntropy": c.AntiEntropy,
		"StreamIdle": c.StreamIdle, "CatchUpTimeout": c.CatchUpTimeout, "RetryMin": c.RetryMin,
		"RetryMax": c.RetryMax, "JoinRetry": c.JoinRetry, "Reconnect": c.Reconnect,
	} {
		if d <= 0 {
			t.Errorf("DefaultConfig().%s = %v, want a positive duration", name, d)
		}
	}
}

// A node restarted without seeds rejoins the members it last knew, kept in
// its store, at start. Here b has no path back to a of its own (b's only
// seed is absent and it does not reconnect to dead members): without the
// record, a stays alone.
func TestSeedlessRestartRejoinsLastKnownMembers(t *testing.T) {
	dir := t.TempDir()
	nw := memnet.New()
	a := startNode(t, nw, "a", dir)
	absent := nw.Node("absent").GossipAddr // nothing runs there
	b := startNode(t, nw, "b", "", func(c *Config) { c.Join = []string{absent}; c.Reconnect = time.Hour })
	if _, err := b.c.ml.Join([]string{a.gossip()}); err != nil {
		t.Fatalf("b joining a: %v", err)
	}
	awaitMembers(t, []*tnode{a, b}, 10*time.Second)
	a.stop()
	eventually(t, 10*time.Second, func() error {
		if m, _ := b.c.Member("a"); m.State.live() {
			return fmt.Errorf("b sees a as %v", m.State)
		}
		return nil
	})
	a2 := startNode(t, nw, "a", dir)
	began := time.Now()
	awaitMembers(t, []*tnode{a2, b}, 10*time.Second)
	t.Logf("restarted seedless node rejoined in %v", time.Since(began).Round(time.Millisecond))
}

// The record keeps live and failed peers (a failed one may come back) and
// forgets one that left.
func TestKnownMembersForgetsOnlyLeftPeers(t *testing.T) {
	st := NewMemoryStorage()
	k := loadKnown(st, "self", slog.New(slog.DiscardHandler))
	k.observe(Member{Name: "self", GossipAddr: "127.0.0.1:1", State: StateAlive, Self: true})
	k.observe(Member{Name: "p", GossipAddr: "127.0.0.1:2", State: StateAlive})
	k.observe(Member{Name: "q", GossipAddr: "127.0.0.1:3", State: StateAlive})
	k.observe(Member{Name: "p", GossipAddr: "127.0.0.1:2", State: StateDead})
	k.observe(Member{Name: "q", GossipAddr: "127.0.0.1:3", State: StateLeft})
	got := loadKnown(st, "self", slog.New(slog.DiscardHandler)).list()
	if len(got) != 1 || got[0] != "127.0.0.1:2" {
		t.Fatalf("recorded %v, want only the failed peer p at 127.0.0.1:2", got)
	}
}
