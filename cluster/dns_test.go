package cluster

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm/internal/memnet"
)

func TestDNSJoinReresolvesWhileAlone(t *testing.T) {
	nw := memnet.New()
	a := startNode(t, nw, "n0", "")
	var mu sync.Mutex
	var records []string
	calls := 0
	resolve := func(_ context.Context, name string) ([]string, error) {
		if name != "mcpswarm.default.svc" {
			return nil, errors.New("no such host")
		}
		mu.Lock()
		defer mu.Unlock()
		calls++
		return append([]string(nil), records...), nil
	}
	b := startNode(t, nw, "n1", "", func(c *Config) {
		c.Join = []string{"dns:mcpswarm.default.svc"}
		c.Resolve = resolve
	})
	// Nothing published yet: b is alone, and says so.
	if len(b.c.Members()) != 1 {
		t.Fatalf("b has members %v", b.c.Members())
	}
	// The headless Service now lists both pods; b must filter itself out
	// and join a.
	mu.Lock()
	records = []string{a.gossip(), b.gossip()}
	mu.Unlock()
	awaitMembers(t, []*tnode{a, b}, 10*time.Second)
	mu.Lock()
	if calls < 2 {
		t.Errorf("resolved %d times, want re-resolution", calls)
	}
	mu.Unlock()
}

func TestResolveSeeds(t *testing.T) {
	res := func(_ context.Context, name string) ([]string, error) {
		if name == "bad" {
			return nil, errors.New("nxdomain")
		}
		return []string{"10.0.0.1:7946", "10.0.0.2:7946"}, nil
	}
	got, err := resolveSeeds(context.Background(), []string{"dns:svc", "10.0.0.3:7946", "dns:bad"}, res, "10.0.0.2:7946")
	if err == nil {
		t.Error("want the failed lookup reported")
	}
	want := []string{"10.0.0.1:7946", "10.0.0.3:7946"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("seeds = %v, want %v", got, want)
	}
}
