// Package mcpswarm is the node: it wires membership and replication
// (cluster), the app runtime (session), authorization (authz) and the MCP
// front (mcp) together, owns their lifecycle, and serves the HTTP and gRPC
// listeners.
package mcpswarm

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/mcp"
	"github.com/mcpswarm/mcpswarm/session"
	"github.com/mcpswarm/mcpswarm/swarm"
	"github.com/mcpswarm/mcpswarm/ui"
)

// Option adjusts how a Node is built.
type Option func(*options)

type options struct {
	logger  *slog.Logger
	stdin   io.Reader
	stdout  io.Writer
	apps    []func(*session.Registry) error
	network Network
	clock   clockwork.Clock
	guard   *authz.Guard
}

// Network carries a node's traffic in place of sockets: tests run whole
// clusters in one process on it (internal/memnet), where a partition is
// a method call. The node's configured HTTP and gRPC addresses are then
// not bound; GossipAddr still names the node on the gossip network.
type Network interface {
	// ListenHTTP returns a fresh listener for MCP, health and metrics;
	// its Addr is the address clients dial. Called once per Start.
	ListenHTTP() (net.Listener, error)
	// ListenGRPC returns a fresh listener for the peer and admin APIs;
	// its Addr is the address peers dial. Called once per Start.
	ListenGRPC() (net.Listener, error)
	// Dial dials a peer's gRPC address.
	Dial(ctx context.Context, addr string) (net.Conn, error)
	// Transport returns a fresh gossip transport (memberlist shuts it
	// down when the node stops). Called once per Start.
	Transport() memberlist.Transport
}

// WithNetwork runs the node on nw instead of sockets (tests).
func WithNetwork(nw Network) Option { return func(o *options) { o.network = nw } }

// WithClock drives the cluster's own timers (heartbeats, leases, the
// acknowledgement bound, anti-entropy, the dead grace) with c instead of
// the wall clock, so a test moves them by advancing a fake clock.
// memberlist, gRPC and the node's other timers keep wall time.
func WithClock(c clockwork.Clock) Option { return func(o *options) { o.clock = c } }

// WithApps registers an embedder's own apps next to the demo apps. Which
// apps clients may start is still Config.Startable (default: the demos).
func WithApps(register func(*session.Registry) error) Option {
	return func(o *options) { o.apps = append(o.apps, register) }
}

// WithGuard authorizes with an embedder's own guard instead of
// Config.PolicyFile or --dev's development policy (mcptest drives an app
// under the guard its test gives). The boot checks still apply: on a
// network transport its authorizers must be SourceConfigured, as
// authz.NewGuard makes them.
func WithGuard(g authz.Guard) Option { return func(o *options) { o.guard = &g } }

// WithLogger sets the node's logger (default: slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithStdio sets the streams served by --stdio.
func WithStdio(in io.Reader, out io.Writer) Option {
	return func(o *options) { o.stdin, o.stdout = in, out }
}

// component is one part of the node with a lifecycle. Components start in
// order and stop in reverse; a failed start stops those already started.
type component struct {
	name  string
	start func(ctx context.Context) error
	stop  func(ctx context.Context) error
}

// Node is one mcpswarm process.
type Node struct {
	cfg  Config
	opts options
	log  *slog.Logger

	metrics *prometheus.Registry
	health  *health.Server
	grpc    *grpc.Server
	http    *http.Server
	httpLn  net.Listener
	grpcLn  net.Listener
	debugLn net.Listener
	mux     *http.ServeMux

	guard     authz.Guard
	key       []byte
	devKey    bool
	tlsServer *tls.Config
	tlsClient *tls.Config
	storage   cluster.Storage
	cluster   *cluster.Cluster
	sessions  *session.Manager
	// snapshots is set once the sessions start; the metrics scrape may
	// read it while the node starts or stops.
	snapshots atomic.Pointer[snapshotStore]
	// replicas holds standby copies for other owners and ships this
	// node's sessions to theirs (replicas.go).
	replicas *replicas
	swarm    *swarm.Swarm
	front    *mcp.Server
	journal  *ui.Journal
	ui       *ui.Handler
	orphans  *orphanSweep

	parts   []component
	started []component

	// serving is set once the swarm has published the restored sessions
	// and cleared when it stops: until then MCP requests get 503.
	serving atomic.Bool

	readyMu sync.Mutex
	readyFn []func() error

	serveErr chan error
}

// NewNode validates cfg and builds a node. Nothing listens until Start.
func NewNode(cfg Config, opts ...Option) (*Node, error) {
	o := options{logger: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Node{
		cfg:      cfg,
		opts:     o,
		log:      o.logger.With("node", cfg.Name),
		metrics:  prometheus.NewRegistry(),
		health:   health.NewServer(),
		mux:      http.NewServeMux(),
		serveErr: make(chan error, 2),
	}
	n.metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerJournalMetrics(n.metrics, n.snapshots.Load)
	if err := n.build(); err != nil {
		return nil, err
	}
	return n, nil
}

// Run starts the node, serves until ctx is cancelled, then stops it within
// the configured shutdown timeout.
func (n *Node) Run(ctx context.Context) error {
	if err := n.Start(ctx); err != nil {
		return err
	}
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-n.serveErr:
		if errors.Is(runErr, errStdioClosed) {
			runErr = nil
		} else {
			n.log.Error("listener failed", "err", runErr)
		}
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), n.cfg.ShutdownTimeout)
	defer cancel()
	if err := n.Stop(stopCtx); err != nil {
		return errors.Join(runErr, err)
	}
	return runErr
}

// Start binds the listeners and starts every component in order. On failure
// it stops what it started and returns one error naming what failed.
func (n *Node) Start(ctx context.Context) error {
	for _, c := range n.parts {
		if err := c.start(ctx); err != nil {
			err = fmt.Errorf("starting %s: %w", c.name, err)
			stopCtx, cancel := context.WithTimeout(context.Background(), n.cfg.ShutdownTimeout)
			defer cancel()
			if serr := n.Stop(stopCtx); serr != nil {
				err = fmt.Errorf("%w; additionally, stopping: %v", err, serr)
			}
			return err
		}
		n.started = append(n.started, c)
	}
	n.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	n.log.Info("node started", "http", n.HTTPAddr(), "grpc", n.GRPCAddr(), "version", n.cfg.Version)
	return nil
}

// Stop stops the started components in reverse order.
func (n *Node) Stop(ctx context.Context) error {
	n.health.Shutdown()
	var errs []error
	for i := len(n.started) - 1; i >= 0; i-- {
		c := n.started[i]
		if c.stop == nil {
			continue
		}
		began := time.Now()
		if err := c.stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stopping %s: %w", c.name, err))
		}
		if d := time.Since(began); d > time.Second {
			n.log.Warn("slow shutdown step", "step", c.name, "took", d.Round(time.Millisecond))
		}
	}
	n.started = nil
	if len(errs) == 0 {
		n.log.Info("node stopped")
	}
	return errors.Join(errs...)
}

// HTTPAddr is the bound HTTP address (useful with port 0).
func (n *Node) HTTPAddr() string {
	if n.httpLn == nil {
		return ""
	}
	return n.httpLn.Addr().String()
}

// GRPCAddr is the bound gRPC address.
func (n *Node) GRPCAddr() string {
	if n.grpcLn == nil {
		return ""
	}
	return n.grpcLn.Addr().String()
}

// GossipAddr is the bound gossip address, once the cluster has started.
func (n *Node) GossipAddr() string {
	if n.cluster == nil {
		return ""
	}
	return n.cluster.Self().GossipAddr
}

// LocalSessions lists the ids of the sessions this node runs.
func (n *Node) LocalSessions() []string {
	if n.sessions == nil {
		return nil
	}
	var ids []string
	for _, info := range n.sessions.List() {
		ids = append(ids, info.ID)
	}
	return ids
}

// SessionStandbys lists the standbys that hold the newest snapshot of
// session id, a session this node owns (none for another node's session,
// or with --session-replicas 0).
func (n *Node) SessionStandbys(id string) []string {
	if n.replicas == nil {
		return nil
	}
	return n.replicas.InSync(id)
}

// AliveMembers counts the members this node sees alive (itself included).
func (n *Node) AliveMembers() int {
	if n.cluster == nil {
		return 0
	}
	k := 0
	for _, m := range n.cluster.Members() {
		if m.State == cluster.StateAlive {
			k++
		}
	}
	return k
}

// Kill stops the node as a crash would, for tests: listeners and peer
// connections close at once and the node does not leave the cluster.
// Sessions are not stopped, so their snapshots stay as the last update left
// them.
func (n *Node) Kill() {
	if n.http != nil {
		_ = n.http.Close()
	}
	if n.front != nil {
		// Release the front's goroutines (its session sweeper) without
		// waiting for anything: in-process, a crash must not leak.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = n.front.Shutdown(ctx)
	}
	if n.grpc != nil {
		n.grpc.Stop()
	}
	n.orphans.stop()
	if n.swarm != nil {
		n.swarm.StopPublishing()
	}
	if n.ui != nil {
		n.ui.Close()
	}
	if n.journal != nil {
		n.journal.Stop()
	}
	if n.sessions != nil {
		_ = n.sessions.Close(context.Background())
		_ = n.snapshots.Load().close()
	}
	if n.replicas != nil {
		_ = n.replicas.close()
		n.replicas = nil
	}
	if n.cluster != nil {
		n.cluster.Kill()
	}
	if n.storage != nil {
		_ = n.storage.Close()
	}
	n.started = nil
}

// onReady adds a readiness condition reported by /readyz.
func (n *Node) onReady(check func() error) {
	n.readyMu.Lock()
	n.readyFn = append(n.readyFn, check)
	n.readyMu.Unlock()
}

func (n *Node) readiness() error {
	n.readyMu.Lock()
	checks := append([]func() error(nil), n.readyFn...)
	n.readyMu.Unlock()
	for _, c := range checks {
		if err := c(); err != nil {
			return err
		}
	}
	return nil
}

// listen binds addr, naming the flag in the error.
func listen(flagName, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Err != nil {
			return nil, &FieldError{Flag: flagName, Err: fmt.Errorf("listen %s: %w", addr, unwrapSyscall(oe.Err))}
		}
		return nil, &FieldError{Flag: flagName, Err: err}
	}
	return ln, nil
}

func unwrapSyscall(err error) error {
	var se interface{ Unwrap() error }
	if errors.As(err, &se) {
		if inner := se.Unwrap(); inner != nil {
			return inner
		}
	}
	return err
}

// bind reserves the HTTP and gRPC ports first, so a port in use fails the
// start before anything else happens, and port 0 resolves to the real
// address peers must dial.
func (n *Node) bind() component {
	return component{
		name: "listeners",
		start: func(context.Context) error {
			if nw := n.opts.network; nw != nil {
				return n.bindNetwork(nw)
			}
			var err error
			if n.httpLn, err = listen("http", n.cfg.HTTPAddr); err != nil {
				return err
			}
			if n.grpcLn, err = listen("grpc", n.cfg.GRPCAddr); err != nil {
				_ = n.httpLn.Close()
				n.httpLn = nil
				return err
			}
			return n.limitListeners()
		},
		stop: func(context.Context) error {
			// Normally closed by serve's stop; this covers a failed start.
			if n.http == nil && n.httpLn != nil {
				_ = n.httpLn.Close()
			}
			if n.grpc == nil && n.grpcLn != nil {
				_ = n.grpcLn.Close()
			}
			return nil
		},
	}
}

// bindNetwork takes the listeners from the node's Network hook.
func (n *Node) bindNetwork(nw Network) error {
	var err error
	if n.httpLn, err = nw.ListenHTTP(); err != nil {
		return &FieldError{Flag: "http", Err: err}
	}
	if n.grpcLn, err = nw.ListenGRPC(); err != nil {
		_ = n.httpLn.Close()
		n.httpLn = nil
		return &FieldError{Flag: "grpc", Err: err}
	}
	return n.limitListeners()
}

// serveGRPC starts the gRPC server (peer and admin APIs, health). Its stop
// runs after the node has left the cluster, so peers have closed their
// long-lived replication streams and a graceful stop only waits for
// in-flight forwarded calls.
func (n *Node) serveGRPC() component {
	return component{
		name: "grpc",
		start: func(context.Context) error {
			go func() {
				if err := n.grpc.Serve(n.grpcLn); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
					n.serveErr <- fmt.Errorf("grpc: %w", err)
				}
			}()
			return nil
		},
		stop: func(ctx context.Context) error {
			stopped := make(chan struct{})
			go func() { n.grpc.GracefulStop(); close(stopped) }()
			select {
			case <-stopped:
			case <-ctx.Done():
				n.grpc.Stop()
				<-stopped
			}
			return nil
		},
	}
}

// serveHTTP starts serving MCP, health and metrics. Its stop closes MCP
// streams first: http.Shutdown waits for every connection to go idle, and
// SSE streams never do by themselves.
func (n *Node) serveHTTP() component {
	return component{
		name: "http",
		start: func(context.Context) error {
			n.http = n.newHTTPServer()
			go func() {
				if err := n.http.Serve(n.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
					n.serveErr <- fmt.Errorf("http: %w", err)
				}
			}()
			return nil
		},
		stop: func(ctx context.Context) error {
			var errs []error
			if n.ui != nil {
				n.ui.Close() // its live streams never go idle by themselves
			}
			if n.front != nil {
				if err := n.front.Shutdown(ctx); err != nil {
					errs = append(errs, fmt.Errorf("mcp: %w", err))
				}
			}
			if err := n.http.Shutdown(ctx); err != nil {
				errs = append(errs, err)
				_ = n.http.Close()
			}
			return errors.Join(errs...)
		},
	}
}

// registerBase installs the endpoints every node has.
func (n *Node) registerBase() {
	n.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	n.mux.Handle("GET /readyz", mcp.HostChecked(http.HandlerFunc(n.serveReadyz)))
	n.mux.Handle("GET /metrics", mcp.HostChecked(promhttpHandler(n.metrics)))
	healthpb.RegisterHealthServer(n.grpc, n.health)
	reflection.Register(n.grpc)
}
