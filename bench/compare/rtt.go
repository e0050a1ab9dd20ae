package main

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// rttSeries is the key of the peer round trip's cells. It is no series of
// the tables: it is what the replicated click's extra latency is measured
// against.
const rttSeries = "rtt"

// peerRTT measures one peer round trip: a gRPC health check on a node's
// gRPC port, over one kept-open connection, from this process. The
// replicated click adds one gRPC message each way between two nodes on the
// same loopback (the snapshot on the owner's HoldStream to its standby, and
// the acknowledgement); a health check is that transport with no work
// behind it, so its p50 is the round trip itself.
// (The forward series' extra latency is not: it adds the front node's MCP
// work on top of the hop.)
type peerRTT struct {
	cc *grpc.ClientConn
	hc healthpb.HealthClient
}

// newPeerRTT connects to p's gRPC port (plaintext, as --dev serves it).
func newPeerRTT(p *proc) (*peerRTT, error) {
	if p.grpc == "" {
		return nil, fmt.Errorf("%s has no gRPC address to measure a round trip to", p.name)
	}
	cc, err := grpc.NewClient(p.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("connecting to %s's gRPC port %s: %w", p.name, p.grpc, err)
	}
	return &peerRTT{cc: cc, hc: healthpb.NewHealthClient(cc)}, nil
}

// workers is one worker calling the health check in a loop: the round trip
// is taken at one client, like the p50 it is compared with.
func (r *peerRTT) workers() []worker {
	return []worker{{do: func(ctx context.Context) error {
		res, err := r.hc.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return fmt.Errorf("gRPC health check: %w", err)
		}
		if res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("gRPC health check: %v", res.GetStatus())
		}
		return nil
	}}}
}

func (r *peerRTT) close() { _ = r.cc.Close() }
