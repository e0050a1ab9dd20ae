package mcpswarm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/mcpswarm/mcpswarm/mcp/seal"

	"github.com/hashicorp/memberlist"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/mcp"
	"github.com/mcpswarm/mcpswarm/mcp/fixture"
	adminv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/admin/v1"
	"github.com/mcpswarm/mcpswarm/session"
	"github.com/mcpswarm/mcpswarm/session/apps"
	"github.com/mcpswarm/mcpswarm/swarm"
	"github.com/mcpswarm/mcpswarm/ui"
)

// loadGuard picks the node's authorization: the embedder's guard
// (WithGuard), the operator's policy file, the named development policy
// under --dev, or the framework default (which a network transport refuses
// at boot).
func (n *Node) loadGuard() error {
	switch {
	case n.opts.guard != nil:
		n.guard = *n.opts.guard
	case n.cfg.PolicyFile != "":
		p, err := authz.LoadPolicyFile(n.cfg.PolicyFile)
		if err != nil {
			return &FieldError{Flag: "policy", Err: err}
		}
		g, err := p.Guard()
		if err != nil {
			return &FieldError{Flag: "policy", Err: err}
		}
		n.guard = g
	case n.cfg.Dev:
		n.guard = authz.DevGuard()
	default:
		n.guard = authz.DefaultGuard()
	}
	m, err := authz.NewMetrics(n.metrics)
	if err != nil {
		return fmt.Errorf("registering authorization metrics: %w", err)
	}
	n.guard = n.guard.Observed(n.log.With("component", "authz"), m)
	return nil
}

// build loads what can be checked without side effects and lays out the
// components in start order.
func (n *Node) build() error {
	if err := n.loadGuard(); err != nil {
		return err
	}
	key, devKey, err := n.cfg.ClusterKey()
	if err != nil {
		return err
	}
	n.key, n.devKey = key, devKey
	if n.cfg.TLS.Enabled() {
		if n.tlsServer, n.tlsClient, err = n.cfg.TLS.configs(); err != nil {
			return err
		}
	}
	n.parts = []component{
		{name: "data dir", start: func(context.Context) error { return n.cfg.CheckDataDir() }},
		n.bind(),
		{name: "storage", start: n.openStorage, stop: n.closeStorage},
		{name: "cluster", start: n.newCluster},
		{name: "sessions", start: n.startSessions, stop: n.stopSessions},
		{name: "mcp", start: n.buildFront, stop: n.stopFront},
		n.serveGRPC(),
		{name: "membership", start: n.joinCluster, stop: n.leaveCluster},
		n.serveHTTP(),
		{name: "swarm", start: n.startSwarm, stop: n.stopSwarm},
	}
	if n.cfg.DebugAddr != "" {
		n.parts = append(n.parts, n.serveDebug())
	}
	if n.cfg.Stdio {
		n.parts = append(n.parts, component{name: "stdio", start: n.startStdio})
	}
	return nil
}

// openStorage opens the node's bbolt file. The node, not the cluster, owns
// it: session snapshots are saved to it until the session manager stops,
// which is after the node has left the cluster.
func (n *Node) openStorage(context.Context) error {
	st, err := cluster.OpenBolt(n.cfg.DataDir, false)
	if err != nil {
		return &FieldError{Flag: "data-dir", Err: err}
	}
	n.storage = st
	return nil
}

func (n *Node) closeStorage(context.Context) error { return n.storage.Close() }

// nodeOwnedStorage lends the node's storage to the cluster without letting
// the cluster close it.
type nodeOwnedStorage struct{ cluster.Storage }

func (nodeOwnedStorage) Close() error { return nil }

func (n *Node) newCluster(context.Context) error {
	cc := cluster.DefaultConfig()
	if loop, _ := authz.IsLoopback(n.cfg.GossipAddr); loop {
		cc = cluster.LocalConfig()
	}
	cc.Name = n.cfg.Name
	cc.GossipAddr = n.cfg.GossipAddr
	cc.AdvertiseAddr = n.cfg.Advertise
	cc.GRPCAddr = advertised(n.GRPCAddr(), n.cfg.Advertise)
	cc.Join = n.cfg.Join
	cc.DNSServer = n.cfg.DNSServer
	cc.Key = n.key
	// Replicated, not stored: the sessions and tools registries are
	// rebuilt from the journal at start (swarm.StartPublishing), and the
	// UI's action log is a lossy view (a ring that drops when full) whose
	// bbolt write per call was the last one on the click path.
	cc.Storage = cluster.Volatile(nodeOwnedStorage{n.storage}, append(swarm.DerivedRegistries(), ui.RegistryName)...)
	cc.Version = n.cfg.Version
	cc.MaxMessageBytes = n.cfg.GRPC.MaxMessageBytes
	cc.DeadGrace = n.cfg.DeadGrace
	cc.ProbeInterval = n.cfg.ProbeInterval
	cc.Zone = n.cfg.Zone
	if n.cfg.TLS.Enabled() {
		cc.TLS = n.tlsClient
	}
	cc.Logger = n.log.With("component", "cluster")
	cc.Registerer = n.metrics
	cc.Clock = n.opts.clock // nil: the wall clock
	if nw := n.opts.network; nw != nil {
		timers := cc.Memberlist
		cc.Memberlist = func(mc *memberlist.Config) {
			if timers != nil {
				timers(mc)
			}
			mc.Transport = nw.Transport()
		}
		cc.Dialer = nw.Dial
	}
	c, err := cluster.New(cc)
	if err != nil {
		return err
	}
	n.cluster = c
	return nil
}

// advertised is the address peers dial for a listener bound to bind: the
// advertise host when given, the bound host otherwise.
func advertised(bind, host string) string {
	if host == "" {
		return bind
	}
	_, port, err := net.SplitHostPort(bind)
	if err != nil {
		return bind
	}
	return net.JoinHostPort(host, port)
}

// leaveCluster leaves gracefully so peers stop routing here at once rather
// than after failure detection.
func (n *Node) leaveCluster(ctx context.Context) error { return n.cluster.Stop(ctx) }

func (n *Node) startSessions(ctx context.Context) (err error) {
	mode := n.cfg.Durability.effective(n.cfg.SessionReplicas)
	snaps, err := openSnapshotStore(n.cfg.DataDir, mode.journalMode(), n.storage, n.log.With("component", "snapshots"))
	if err != nil {
		return &FieldError{Flag: "data-dir", Err: err}
	}
	// Every node holds standby copies for others whatever its own mode;
	// only in replica mode does it ship its own sessions' snapshots.
	shipTo := 0
	if mode == DurabilityReplica {
		shipTo = n.cfg.SessionReplicas
	}
	rep, err := openReplicas(n.cfg.DataDir, n.cluster, shipTo, n.metrics, n.log.With("component", "standby"))
	if err != nil {
		_ = snaps.close()
		return &FieldError{Flag: "data-dir", Err: err}
	}
	n.replicas, snaps.rep = rep, rep
	defer func() {
		if err != nil {
			_ = rep.close()
			n.replicas = nil
		}
	}()
	n.snapshots.Store(snaps)
	reg := session.NewRegistry()
	if err := apps.RegisterWith(reg, n.cfg.Widgets.appBounds()); err != nil {
		_ = snaps.close()
		return fmt.Errorf("registering demo apps: %w", err)
	}
	for _, register := range n.opts.apps {
		if err := register(reg); err != nil {
			_ = snaps.close()
			return fmt.Errorf("registering apps: %w", err)
		}
	}
	mc := session.ManagerConfig{
		Registry: reg,
		Store:    snaps,
		Logger:   n.log.With("component", "session"),
	}
	if len(n.cfg.Startable) > 0 {
		mc.Startable = n.cfg.Startable
	}
	// 0 is unlimited here as in the policy; the front counts the cap
	// across the swarm (mcp/sessioncap.go), this node's count is its floor.
	mc.MaxPerPrincipal = n.guard.Limits.SessionsPerPrincipal
	if l := n.guard.Limits; l.SessionStateBytes > 0 {
		mc.MaxStateBytes = l.SessionStateBytes
	}
	mc.MaxTextBytes = n.cfg.Widgets.TextBytes
	mc.MaxCommands = n.cfg.Widgets.Commands
	m, err := session.NewManager(mc)
	if err != nil {
		_ = snaps.close()
		return &FieldError{Flag: "startable", Err: err}
	}
	n.sessions = m
	if err := m.Restore(ctx); err != nil {
		n.log.Warn("some sessions could not be restored", "err", err)
	}
	if k := len(m.List()); k > 0 {
		n.log.Info("restored sessions from the data dir", "sessions", k)
	}
	return nil
}

func (n *Node) stopSessions(ctx context.Context) error {
	var err error
	if n.sessions != nil {
		err = n.sessions.Close(ctx)
	}
	if cerr := n.snapshots.Load().close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("closing the snapshot journal: %w", cerr))
	}
	if n.replicas != nil {
		if cerr := n.replicas.close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("closing the standby journal: %w", cerr))
		}
	}
	return err
}

// buildFront creates the swarm view, the MCP front and the gRPC server, and
// mounts the front on the HTTP mux. The swarm declares its registries here,
// before the cluster starts. The front runs goroutines from its
// construction (mcp-go's session sweeper) and watches the swarm, so a
// failure after it exists shuts it down here: a failed step's own stop does
// not run.
func (n *Node) buildFront(ctx context.Context) (err error) {
	sessionKey := DeriveKey(n.key, "mcp-session-id")
	idSerial, err := seal.SerialReader(sessionKey)
	if err != nil {
		return err
	}
	sw, err := swarm.New(swarm.Config{Cluster: n.cluster, Manager: n.sessions, Logger: n.log.With("component", "swarm"),
		Registerer: n.metrics, MaxRevocations: n.cfg.MaxRevocations, IDSerial: idSerial, Standbys: n.replicas,
		Storage: nodeOwnedStorage{n.storage}, Tasks: n.cfg.TaskLimits})
	if err != nil {
		return err
	}
	n.swarm = sw
	n.replicas.attach(n.sessions, sw)
	if err := n.registerLostMetric(); err != nil {
		return err
	}
	// The web UI's action journal is a registry too, declared before the
	// cluster starts; the front's backend journals agent calls into it.
	if n.journal, err = ui.NewJournal(n.cluster, n.cfg.Name, n.log.With("component", "ui")); err != nil {
		return err
	}
	limiter := authz.NewRateLimiter(n.guard.Limits)
	mc := mcp.Config{
		Node:         n.cfg.Name,
		Backend:      ui.Observed(sw, n.journal),
		Guard:        n.guard,
		RateLimiter:  limiter,
		SessionKey:   sessionKey,
		Dev:          n.cfg.Dev,
		Keepalive:    n.cfg.Keepalive,
		MaxBodyBytes: n.cfg.MaxBodyBytes,
		Tasks:        n.cfg.TaskLimits,
		Logger:       n.log.With("component", "mcp"),
		Registerer:   n.metrics,
		Version:      n.cfg.Version,
		// Any node serves any connection: mcp.New attaches the front to
		// the swarm in one step (the seam). What a connection's home node
		// learnt travels in the conns registry, notifications leave from
		// the node holding its stream, answers to server-to-client
		// requests find the node that asked, and a DELETE anywhere ends
		// the connection everywhere.
		Cluster: sw,
	}
	if n.cfg.Conformance {
		mc.Extend = fixture.RegisterShared(sessionKey)
		mc.Completer = fixture.Completer{}
	}
	front, err := mcp.New(mc)
	if err != nil {
		return err
	}
	n.front = front
	defer func() {
		if err != nil {
			_ = n.stopFront(ctx)
		}
	}()
	network := !n.cfg.Stdio
	if err := authz.CheckBoot(authz.BootConfig{
		Guard:                &n.guard,
		NetworkTransports:    network,
		Dev:                  n.cfg.Dev,
		ListenAddrs:          n.listenAddrs(),
		SensitiveStaticTools: front.SensitiveStaticTools(),
	}); err != nil {
		return err
	}
	n.logGuard()
	for _, w := range authz.BootWarnings(authz.BootConfig{Guard: &n.guard, NetworkTransports: network, Dev: n.cfg.Dev, ListenAddrs: n.listenAddrs()}) {
		n.log.Warn(w)
	}

	admin := adminGuard{token: []byte(AdminToken(n.key))}
	// The cluster's options carry the message limits, keepalives and the
	// peer-credential interceptors; the admin guard chains after them and
	// only looks at admin methods.
	opts := append(n.cluster.ServerOptions(),
		grpc.ChainUnaryInterceptor(admin.unary),
		grpc.ChainStreamInterceptor(admin.stream),
	)
	// The gate authenticates each stream from its headers before grpc-go
	// reads its message, and bounds streams, handshakes and idle conns.
	gate, err := newGRPCGate(n.cfg.GRPC, n.key, admin, n.log.With("component", "grpc"), n.metrics)
	if err != nil {
		return err
	}
	opts = append(opts, gate.options()...)
	if n.tlsServer != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(n.tlsServer)))
	}
	n.grpc = grpc.NewServer(opts...)
	n.cluster.Register(n.grpc)
	adminv1.RegisterAdminServiceServer(n.grpc, &adminServer{n: n})
	n.registerBase()
	if network {
		n.mux.Handle("/", n.whileServing(front.Handler()))
		if err := n.mountUI(limiter); err != nil {
			return err
		}
	}
	n.onReady(func() error {
		if !n.cluster.Ready() {
			return errors.New("not yet joined and replicated")
		}
		if !n.serving.Load() {
			return errors.New("sessions not yet restored and published")
		}
		if n.swarm.Draining() {
			// Out of the Service's endpoints before the handoff starts,
			// so new connections go to nodes that keep their sessions.
			return errors.New("draining: sessions are moving to other nodes")
		}
		return nil
	})
	return nil
}

// stopFront releases the MCP front: its client streams, parked calls,
// mcp-go's session sweeper and its watch on the swarm. The HTTP step has
// usually shut it down already (Shutdown runs once); this covers a start
// that failed before HTTP served.
func (n *Node) stopFront(ctx context.Context) error {
	if n.front == nil {
		return nil
	}
	if err := n.front.Shutdown(ctx); err != nil {
		return fmt.Errorf("shutting the mcp front down: %w", err)
	}
	return nil
}

func (n *Node) joinCluster(ctx context.Context) error {
	if n.devKey {
		n.log.Warn("DEVELOPMENT CLUSTER KEY IN USE: it is public; anyone on this machine can join this cluster (use --cluster-key-file outside development)")
	}
	return n.cluster.Start(ctx)
}

// startSwarm publishes the restored sessions and then lets MCP requests in
// (see whileServing).
func (n *Node) startSwarm(ctx context.Context) error {
	n.journal.Start()
	if err := n.swarm.StartPublishing(ctx); err != nil {
		return err
	}
	n.orphans = startOrphanSweep(n.swarm, orphanSweepEvery, n.log.With("component", "swarm"))
	n.serving.Store(true)
	return nil
}

func (n *Node) stopSwarm(context.Context) error {
	n.serving.Store(false)
	n.orphans.stop()
	n.swarm.StopPublishing()
	n.journal.Stop()
	return nil
}

// mountUI serves the web UI at /ui with the front's guard and rate limiter,
// so a page action passes what a tools/call passes.
func (n *Node) mountUI(limiter *authz.RateLimiter) error {
	h, err := ui.New(ui.Config{
		Node:        n.cfg.Name,
		Backend:     n.swarm,
		Guard:       n.guard,
		RateLimiter: limiter,
		Journal:     n.journal,
		Key:         DeriveKey(n.key, "ui-csrf"),
		Dev:         n.cfg.Dev,
		Logger:      n.log.With("component", "ui"),
		ReplicationLag: func() map[string]float64 {
			return gaugeByLabel(n.metrics, "mcpswarm_cluster_replication_lag", "peer")
		},
	})
	if err != nil {
		return fmt.Errorf("building the web UI: %w", err)
	}
	n.ui = h
	// A page action acts on sessions as a tools/call does: it waits for
	// the restored sessions too.
	n.mux.Handle("/ui", n.whileServing(h))
	n.mux.Handle("/ui/", n.whileServing(h))
	return nil
}

// startStdio serves MCP on the process's standard streams; when the client
// closes stdin the node shuts down, as stdio servers do.
func (n *Node) startStdio(ctx context.Context) error {
	in, out := n.opts.stdin, n.opts.stdout
	if in == nil || out == nil {
		return &FieldError{Flag: "stdio", Err: errors.New("no standard streams were given to serve")}
	}
	go func() {
		err := n.front.ServeStdio(context.WithoutCancel(ctx), in, out)
		if err != nil && !errors.Is(err, context.Canceled) {
			n.serveErr <- fmt.Errorf("stdio: %w", err)
			return
		}
		n.log.Info("stdio client closed the connection")
		n.serveErr <- errStdioClosed
	}()
	return nil
}

// errStdioClosed ends Run cleanly when the stdio client goes away.
var errStdioClosed = errors.New("stdio closed")

func (n *Node) logGuard() {
	switch {
	case n.cfg.Dev:
		n.log.Warn("DEVELOPMENT POLICY IN USE: every tool call is allowed for every client ("+n.guard.Name+"); loopback only", "policy", n.guard.Name)
	case n.cfg.PolicyFile != "":
		n.log.Info("authorization policy loaded", "policy", n.guard.Name, "file", n.cfg.PolicyFile)
	default:
		n.log.Info("no policy configured: tools deny everything, reads allow only the listing methods", "policy", n.guard.Name)
	}
}

func (n *Node) readyMembers() []readyzMember {
	if n.cluster == nil {
		return nil
	}
	var out []readyzMember
	for _, m := range n.cluster.Members() {
		out = append(out, readyzMember{Name: m.Name, State: strings.ToLower(m.State.String())})
	}
	for _, name := range n.lostMembers() {
		out = append(out, readyzMember{Name: name, State: "lost"})
	}
	return out
}

// listenAddrs are every address the node binds or advertises, for the
// --dev loopback gate.
func (n *Node) listenAddrs() []string {
	addrs := []string{n.cfg.HTTPAddr, n.cfg.GRPCAddr, n.cfg.GossipAddr}
	if n.cfg.Advertise != "" {
		addrs = append(addrs, net.JoinHostPort(n.cfg.Advertise, "0"))
	}
	return addrs
}
