package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/mcpswarm/mcpswarm/bench/internal/mcpconn"
	"github.com/mcpswarm/mcpswarm/bench/internal/swarmproc"
	"github.com/mcpswarm/mcpswarm/deploy"
)

// token is the one principal's bearer token in the generated policy.
const token = "idle-bench-token"

// cluster is the nodes the run started, node 1 first (the others join it).
type cluster struct{ *swarmproc.Cluster }

// startCluster starts k.n nodes on fresh loopback ports, one at a time,
// with their key and policy in dir; with the LAN timers their gossip binds
// this machine's own address and they get the manifest's flags.
func startCluster(ctx context.Context, k knobs, dir string) (*cluster, error) {
	spec := swarmproc.Spec{Bin: k.bin, Dir: dir, Prefix: "idle", N: k.n, Token: token,
		LogDir: k.logDir, ProfileFirst: k.profile != ""}
	if k.timers == "lan" {
		var err error
		if spec.GossipHost, err = swarmproc.OffLoopback(); err != nil {
			return nil, err
		}
		if spec.Args, err = deploy.ManifestTimers(); err != nil {
			return nil, err
		}
	}
	c, err := swarmproc.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &cluster{c}, nil
}

// startSessions opens one MCP connection per node and starts perNode
// counter sessions through it. The connections stay open and idle.
func (c *cluster) startSessions(ctx context.Context, perNode int) error {
	if perNode == 0 {
		return nil
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	for i, n := range c.Nodes {
		cn, err := mcpconn.Dial(ctx, hc, n.BaseURL+"/mcp", token, "bench-idle")
		if err != nil {
			return fmt.Errorf("%s: %w", n.Name, err)
		}
		for s := range perNode {
			id := fmt.Sprintf("n%02ds%d", i+1, s)
			if err := cn.CallTool(ctx, "swarm_start", map[string]any{"app": "counter", "id": id}); err != nil {
				return fmt.Errorf("%s: swarm_start %s: %w", n.Name, id, err)
			}
		}
	}
	return nil
}
