package scale

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/mcpswarm/mcpswarm/session"
	"github.com/mcpswarm/mcpswarm/session/apps"
)

// actorCost is the heap one running counter session costs its owner's
// session manager, with no swarm: the part of a session that is not
// replicated.
func actorCost(ctx context.Context, k int) (float64, error) {
	if k == 0 {
		return 0, nil
	}
	reg := session.NewRegistry()
	if err := apps.Register(reg); err != nil {
		return 0, err
	}
	mgr, err := session.NewManager(session.ManagerConfig{Registry: reg, Startable: []string{"counter"}})
	if err != nil {
		return 0, err
	}
	defer func() { _ = mgr.Close(ctx) }()
	h0 := liveHeap()
	for i := range k {
		if _, err := mgr.Start(ctx, "", "counter", fmt.Sprintf("u-%d", i)); err != nil {
			return 0, fmt.Errorf("starting a counter session: %w", err)
		}
	}
	return (liveHeap() - h0) / float64(k), nil
}

// loadAverage is the machine's 1-minute load average, 0 where unknown.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
