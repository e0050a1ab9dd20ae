package mcpswarm

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/mcpswarm/mcpswarm/cluster"
)

// The bounds of the gRPC listener against callers that hold no credential
// are the node's GRPCLimits (flags --grpc-*): peers and the admin CLI never
// come near the defaults. The worst an anonymous caller can hold is
// OpenStreams × MaxMessageBytes, each for at most OpenDeadline.

// openMethodPrefixes are the services any caller may use without a
// credential: the standard health check (Kubernetes probes) and reflection.
var openMethodPrefixes = []string{
	"/grpc.health.v1.Health/",
	"/grpc.reflection.v1.ServerReflection/",
	"/grpc.reflection.v1alpha.ServerReflection/",
}

// grpcGate authenticates every stream from its headers, before grpc-go
// reads any of its messages: a stream without the peer credential or admin
// token is refused while its message is still unread, so a caller without
// credentials cannot make the server buffer anything of size.
type grpcGate struct {
	limits  GRPCLimits
	peers   *cluster.PeerVerifier
	admin   adminGuard
	open    chan struct{} // semaphore of anonymous streams
	refused *prometheus.CounterVec
	log     *slog.Logger

	mu       sync.Mutex
	lastWarn time.Time
}

func newGRPCGate(limits GRPCLimits, clusterKey []byte, admin adminGuard, log *slog.Logger, reg prometheus.Registerer) (*grpcGate, error) {
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpswarm_grpc_streams_refused_total",
		Help: "gRPC streams refused from their headers, before any message was read, by reason.",
	}, []string{"reason"})
	if err := reg.Register(refused); err != nil {
		return nil, fmt.Errorf("registering gRPC gate metrics: %w", err)
	}
	peers, err := cluster.NewPeerVerifier(clusterKey)
	if err != nil {
		return nil, fmt.Errorf("deriving the peer credential key: %w", err)
	}
	return &grpcGate{limits: limits, peers: peers, admin: admin, open: make(chan struct{}, limits.OpenStreams), refused: refused, log: log}, nil
}

// tap is the server's InTapHandle. It runs in the transport's reader, so
// it must be quick: one HMAC or one constant-time compare.
func (g *grpcGate) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	m := info.FullMethodName
	switch {
	case strings.HasPrefix(m, "/mcpswarm.peer.v1."), strings.HasPrefix(m, "/mcpswarm.forward.v1."), strings.HasPrefix(m, "/mcpswarm.standby.v1."):
		// Replication, forwarding and standby copies: cluster members only.
		if !g.peerOK(info.Header) {
			return nil, g.refuse(ctx, m, "peer_credential", status.Error(codes.Unauthenticated, "peer API needs the peer credential derived from the cluster key"))
		}
		return ctx, nil
	case strings.HasPrefix(m, adminMethodPrefix):
		if err := g.admin.checkMD(info.Header); err != nil {
			return nil, g.refuse(ctx, m, "admin_token", err)
		}
		return ctx, nil
	}
	for _, p := range openMethodPrefixes {
		if strings.HasPrefix(m, p) {
			admitted, err := g.admitOpen(ctx)
			if err != nil {
				return nil, g.refuse(ctx, m, "anonymous_slots", err)
			}
			return admitted, nil
		}
	}
	return nil, g.refuse(ctx, m, "unknown_method", status.Errorf(codes.Unimplemented, "unknown method %s", m))
}

// refuse counts a refusal and logs at most one line per 10 s: whoever
// floods the gate must not flood the log too.
func (g *grpcGate) refuse(ctx context.Context, method, reason string, err error) error {
	g.refused.WithLabelValues(reason).Inc()
	g.mu.Lock()
	now := time.Now()
	warn := now.Sub(g.lastWarn) >= 10*time.Second
	if warn {
		g.lastWarn = now
	}
	g.mu.Unlock()
	if warn {
		remote := ""
		if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
			remote = p.Addr.String()
		}
		g.log.Warn("refusing gRPC streams before reading them (further refusals for 10 s are only counted in mcpswarm_grpc_streams_refused_total)",
			"method", method, "reason", reason, "remote", remote)
	}
	return err
}

// admitOpen takes one of the anonymous stream slots for the life of the
// stream, and gives the stream a deadline.
func (g *grpcGate) admitOpen(ctx context.Context) (context.Context, error) {
	select {
	case g.open <- struct{}{}:
	default:
		return nil, status.Errorf(codes.ResourceExhausted, "more than %d concurrent unauthenticated calls (the node's grpc-open-streams setting); retry later", g.limits.OpenStreams)
	}
	ctx, cancel := context.WithTimeout(ctx, g.limits.OpenDeadline)
	// The stream's context ends when the stream does (or at the deadline),
	// which releases the slot exactly once.
	context.AfterFunc(ctx, func() { cancel(); <-g.open })
	return ctx, nil
}

// peerOK checks the peer credential the cluster's interceptors check again
// later: the HMAC of the claimed name under the cluster's peer key (each
// member's computed once, see cluster.PeerVerifier).
func (g *grpcGate) peerOK(md metadata.MD) bool {
	if names := md.Get(cluster.MDPeerName); len(names) != 1 || len(names[0]) > 64 {
		return false
	}
	_, err := g.peers.Verify(md)
	return err == nil
}

// options are the server options that bound what a connection can hold.
// They come after the cluster's, so where both set a field these win.
func (g *grpcGate) options() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.InTapHandle(g.tap),
		grpc.MaxConcurrentStreams(uint32(g.limits.MaxStreams)),
		grpc.ConnectionTimeout(g.limits.HandshakeTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: g.limits.IdleTimeout,
			Time:              30 * time.Second,
			Timeout:           10 * time.Second,
		}),
	}
}
