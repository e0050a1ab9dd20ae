package scale

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/internal/memnet"
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

// linkCost is the heap one gRPC connection between two nodes costs, both
// ends, with the cluster's transport options (the dialer's client transport and the peer's server transport),
// once a call has crossed it: what every node pays per peer, beside the
// in-memory buffers a kernel would hold.
func linkCost(ctx context.Context, k int) (float64, error) {
	if k == 0 {
		return 0, nil
	}
	net := memnet.NewBuffered(pipeBuffer, "a", "b")
	a, b := net.Node("a"), net.Node("b")
	srv := grpc.NewServer(cluster.PeerTransportServerOptions()...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	bl, err := b.ListenGRPC()
	if err != nil {
		return 0, err
	}
	go func() { _ = srv.Serve(bl) }()
	defer srv.Stop()
	h0 := liveHeap()
	var conns []*grpc.ClientConn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range k {
		opts := append(cluster.PeerTransportDialOptions(), grpc.WithContextDialer(a.Dial),
			grpc.WithTransportCredentials(insecure.NewCredentials()))
		cc, err := grpc.NewClient("passthrough:///"+b.GRPCAddr, opts...)
		if err != nil {
			return 0, err
		}
		conns = append(conns, cc)
		if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			return 0, fmt.Errorf("a call over a fresh connection: %w", err)
		}
	}
	pipes := float64(net.Conns()) * 2 * pipeBuffer
	return (liveHeap() - h0 - pipes) / float64(k), nil
}
