package cluster

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpswarm/mcpswarm/crdt"
	"github.com/mcpswarm/mcpswarm/crdt/crdtpb"
	peerv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/peer/v1"
)

// Errors returned by Cluster and Registry methods.
var (
	// ErrNotStarted is returned by Registry writes before Start.
	ErrNotStarted = errors.New("cluster: not started")
	// ErrStopped is returned by Start, Registry writes and PeerConn after
	// Stop or Kill.
	ErrStopped = errors.New("cluster: stopped")
	// ErrStarted is returned by Registry and Start once Start has run.
	ErrStarted = errors.New("cluster: already started")
	// ErrUnknownPeer is returned by PeerConn for a name that is not a live
	// member.
	ErrUnknownPeer = errors.New("cluster: unknown or unreachable peer")
)

// ForwardHandler serves the forwarding RPCs that mcpswarm.peer.v1 carried
// before mcpswarm.forward.v1 (owned by the layer above, registered with
// AddService) replaced them. A node serves them for one release, for peers
// of the previous release during a rolling upgrade.
//
// Deprecated: goes with PeerService's CallTool, ReadResource and
// DeliverClientMessage in the next release.
type ForwardHandler interface {
	CallTool(req *peerv1.CallToolRequest, stream grpc.ServerStreamingServer[peerv1.CallToolResponse]) error
	ReadResource(ctx context.Context, req *peerv1.ReadResourceRequest) (*peerv1.ReadResourceResponse, error)
	DeliverClientMessage(ctx context.Context, req *peerv1.DeliverClientMessageRequest) (*peerv1.DeliverClientMessageResponse, error)
}

// Cluster is this node's membership and registry replication.
type Cluster struct {
	cfg      Config
	log      *slog.Logger
	metrics  *metrics
	keys     keys
	verifier *PeerVerifier // checks the peer credential of incoming calls
	store    Storage
	lim      crdtpb.Limits // decoder bounds for peer input
	origin   crdt.Origin
	view     *view
	repl     *replicator
	fwd      atomic.Pointer[ForwardHandler]

	svcMu    sync.Mutex
	services []func(grpc.ServiceRegistrar)

	regMu sync.Mutex
	regs  map[string]*Registry

	// syncGen counts the membership and lease changes that can end an
	// in-sync verdict; syncMemo is InSync's last such verdict (lease.go).
	syncGen  atomic.Uint64
	syncMemo atomic.Pointer[syncVerdict]

	mu         sync.Mutex
	state      int // 0 new, 1 started, 2 stopped
	ml         *memberlist.Memberlist
	gossipAddr string // our advertised gossip address, fixed at Start
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	joined     atomic.Bool
	settled    atomic.Bool // in sync once since the start (Ready)
	known      *knownMembers
	stopKnown  func()
	aeDone     atomic.Bool
}

const (
	stateNew = iota
	stateStarted
	stateStopped
)

// New checks cfg, opens the store and draws this run's epoch. It does no
// networking.
func New(cfg Config) (*Cluster, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("cluster: invalid configuration: %w", err)
	}
	k, err := deriveKeys(cfg.Key)
	if err != nil {
		return nil, err
	}
	met, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("registering cluster metrics: %w", err)
	}
	store := cfg.Storage
	if store == nil && cfg.DataDir != "" {
		if store, err = OpenBolt(cfg.DataDir, cfg.NoSync); err != nil {
			return nil, fmt.Errorf("opening store in data dir %s: %w", cfg.DataDir, err)
		}
	} else if store == nil {
		store = NewMemoryStorage()
	}
	epoch, err := drawEpoch(store, time.Now())
	if err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("drawing epoch in data dir %q: %w", cfg.DataDir, err)
	}
	c := &Cluster{
		cfg: cfg, log: cfg.Logger, metrics: met, keys: k, verifier: newPeerVerifier(k.peer), store: store,
		origin: crdt.Origin{Name: cfg.Name, Epoch: epoch},
		lim:    crdtpb.LimitsFor(cfg.CRDT),
		regs:   map[string]*Registry{},
	}
	meta := nodeMeta{GRPCAddr: cfg.GRPCAddr, Epoch: epoch, Version: cfg.Version, Caps: ownCapabilities(cfg)}
	c.view = newView(cfg.Name, meta, c.log, met, &c.syncGen)
	if _, err := meta.encode(); err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("cluster: invalid configuration: %w", err)
	}
	c.repl = newReplicator(c)
	return c, nil
}

// drawEpoch picks max(last+1, unixMillis<<16 | random16) and records it, so a
// name's epochs strictly increase across restarts.
func drawEpoch(s Storage, now time.Time) (uint64, error) {
	hist, err := s.Epochs()
	if err != nil {
		return 0, err
	}
	var r [2]byte
	if _, err := rand.Read(r[:]); err != nil {
		return 0, fmt.Errorf("reading random bits: %w", err)
	}
	e := uint64(now.UnixMilli())<<16 | uint64(binary.BigEndian.Uint16(r[:]))
	if len(hist) > 0 {
		e = max(e, slices.Max(hist)+1)
	}
	if err := s.AddEpoch(e); err != nil {
		return 0, err
	}
	return e, nil
}

// Registry declares (or returns) the replicated registry name. Declare every
// registry before Start; names are 1 to 32 lowercase letters.
func (c *Cluster) Registry(name string) (*Registry, error) {
	if !registryName.MatchString(name) {
		return nil, fmt.Errorf("declaring registry %q: name must be 1 to 32 of [a-z]", name)
	}
	c.regMu.Lock()
	defer c.regMu.Unlock()
	if r, ok := c.regs[name]; ok {
		return r, nil
	}
	c.mu.Lock()
	st := c.state
	c.mu.Unlock()
	if st != stateNew {
		return nil, fmt.Errorf("declaring registry %s: %w", name, ErrStarted)
	}
	r := newRegistry(c, name)
	c.regs[name] = r
	return r, nil
}

// registry returns a declared registry or nil.
func (c *Cluster) registry(name string) *Registry {
	c.regMu.Lock()
	defer c.regMu.Unlock()
	return c.regs[name]
}

// registries returns the declared registries sorted by name.
func (c *Cluster) registries() []*Registry {
	c.regMu.Lock()
	out := make([]*Registry, 0, len(c.regs))
	for _, r := range c.regs {
		out = append(out, r)
	}
	c.regMu.Unlock()
	slices.SortFunc(out, func(a, b *Registry) int { return strings.Compare(a.name, b.name) })
	return out
}

// Register registers the peer service, and the services added with
// AddService, on s. Install UnaryInterceptor and StreamInterceptor (or
// ServerOptions) on s as well.
func (c *Cluster) Register(s grpc.ServiceRegistrar) {
	peerv1.RegisterPeerServiceServer(s, &peerServer{c: c, readsRefs: ownCapabilities(c.cfg).Has(CapStreamRefs)})
	c.svcMu.Lock()
	services := slices.Clone(c.services)
	c.svcMu.Unlock()
	for _, register := range services {
		register(peerRegistrar{c: c, inner: s})
	}
}

// ServerOptions returns the options the node's gRPC server needs for the
// peer service: message size limits, keepalive and the credential
// interceptors.
func (c *Cluster) ServerOptions() []grpc.ServerOption {
	return serverOptions(c)
}

// SetForwardHandler sets the handler of the deprecated forwarding RPCs of
// the peer service (see ForwardHandler). Until it is set those calls
// answer Unavailable.
func (c *Cluster) SetForwardHandler(h ForwardHandler) {
	c.fwd.Store(&h)
}

func (c *Cluster) forwardHandler() (ForwardHandler, error) {
	p := c.fwd.Load()
	if p == nil || *p == nil {
		return nil, status.Error(codes.Unavailable, "no forward handler on this node")
	}
	return *p, nil
}

// Start restores this node's own entries under the new epoch, starts
// memberlist, joins the seeds and starts replication. A failed initial join
// is retried in the background while the node is alone.
func (c *Cluster) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state {
	case stateStarted:
		return ErrStarted
	case stateStopped:
		return ErrStopped
	}
	restored := 0
	for _, r := range c.registries() {
		n, err := r.restore()
		if err != nil {
			return fmt.Errorf("starting cluster: %w", err)
		}
		restored += n
	}
	c.known = loadKnown(c.store, c.cfg.Name, c.log)
	// The members the last run knew (and did not see leave) count against
	// the majority until heard from: restarted where it reaches nobody, a
	// node must not count itself alone, hence a majority.
	c.repl.leases.remember(c.known.names())
	c.stopKnown = c.view.watch(c.known.observe)
	ml, err := memberlist.Create(c.memberlistConfig())
	if err != nil {
		c.stopKnown()
		return fmt.Errorf("starting memberlist on %s: %w", c.cfg.GossipAddr, err)
	}
	c.ml = ml
	// LocalNode points into memberlist's state, which UpdateNode rewrites:
	// read the address once, here.
	c.gossipAddr = ml.LocalNode().Address()
	c.state = stateStarted
	runCtx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.log.Info("cluster started", slog.String("origin", c.origin.String()), slog.String("gossip", c.gossipAddr),
		slog.String("grpc", c.cfg.GRPCAddr), slog.Int("restored", restored))
	c.wg.Add(3)
	go func() { defer c.wg.Done(); c.repl.run(runCtx) }()
	c.joinOnce(ctx)
	// A node restarted without seeds (or whose seeds are down) finds its
	// cluster again through the members it last knew; in the background,
	// so an address that went dark does not hold up the start.
	go func() { defer c.wg.Done(); c.joinKnown() }()
	go func() { defer c.wg.Done(); c.joinLoop(runCtx) }()
	return nil
}

func (c *Cluster) memberlistConfig() *memberlist.Config {
	mc := memberlist.DefaultLANConfig()
	host, port, _ := net.SplitHostPort(c.cfg.GossipAddr)
	p, _ := net.LookupPort("tcp", port)
	mc.Name = c.cfg.Name
	mc.BindAddr, mc.BindPort = host, p
	mc.AdvertisePort = p
	if c.cfg.AdvertiseAddr != "" {
		mc.AdvertiseAddr = c.cfg.AdvertiseAddr
	}
	mc.SecretKey = c.keys.gossip
	mc.Delegate = c.view
	mc.Events = c.view
	mc.Logger = newStdLogger(c.log)
	mc.DeadNodeReclaimTime = time.Second // a restarted pod may take its name back once the old one is dead
	// Gossip here is membership and a few hundred bytes of node metadata,
	// so LZW buys little, and memberlist builds a 64 KiB LZW table for
	// every message it compresses: most of what an idle node allocated.
	// Receivers read compressed and plain messages alike, so nodes with and
	// without it mix during a rolling upgrade.
	mc.EnableCompression = false
	if c.cfg.Memberlist != nil {
		c.cfg.Memberlist(mc)
	}
	if p := c.cfg.ProbeInterval; p > 0 {
		mc.ProbeInterval = p
		mc.ProbeTimeout = p / 2
	}
	return mc
}

// joinOnce resolves the seeds and joins them; it reports whether the node
// counts as joined (reached a seed, or has no seeds: the first node).
func (c *Cluster) joinOnce(ctx context.Context) bool {
	if len(c.cfg.Join) == 0 {
		c.joined.Store(true)
		return true
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	seeds, err := resolveSeeds(rctx, c.cfg.Join, c.resolver(), c.gossipAddr)
	cancel()
	if err != nil {
		c.log.Warn("resolving seeds", slog.String("reason", err.Error()))
	}
	if len(seeds) == 0 {
		if err == nil {
			c.joined.Store(true) // only ourselves: the first node
		}
		return c.joined.Load()
	}
	n, err := c.ml.Join(seeds)
	if n > 0 {
		c.joined.Store(true)
		c.log.Info("joined cluster", slog.Int("reached", n), slog.Any("seeds", seeds))
		return true
	}
	c.log.Warn("joining seeds", slog.Any("seeds", seeds), slog.Any("reason", err))
	return false
}

// joinKnown joins the members this node last knew (kept in its store) that
// are not live members now, each on its own goroutine: an address that
// went dark costs one memberlist TCP timeout, not one per address. They
// never gate readiness: they may all be gone for good.
func (c *Cluster) joinKnown() {
	live := map[string]bool{c.gossipAddr: true}
	for _, m := range c.view.list() {
		if m.State.live() {
			live[m.GossipAddr] = true
		}
	}
	addrs := slices.DeleteFunc(c.known.list(), func(a string) bool { return live[a] })
	c.joinEach(addrs, "rejoining the members last known")
}

// joinEach joins every address in parallel and waits for all of them.
func (c *Cluster) joinEach(addrs []string, what string) {
	if len(addrs) == 0 {
		return
	}
	var wg sync.WaitGroup
	var reached atomic.Int32
	for _, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if n, _ := c.ml.Join([]string{a}); n > 0 {
				reached.Add(1)
			}
		}()
	}
	wg.Wait()
	c.log.Debug(what, slog.Any("addrs", addrs), slog.Int("reached", int(reached.Load())))
}

// joinLoop re-resolves and re-joins the seeds every JoinRetry while the
// node is alone, and otherwise every Reconnect tries to rejoin dead members
// (within their grace) and seeds that are not members, so a healed
// partition merges again. It wakes only when one of them is due.
func (c *Cluster) joinLoop(ctx context.Context) {
	t := time.NewTimer(min(c.cfg.JoinRetry, c.cfg.Reconnect))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if c.ml.NumMembers() <= 1 && (len(c.cfg.Join) > 0 || len(c.known.list()) > 0) {
			c.joinOnce(ctx)
			c.joinKnown()
			t.Reset(c.cfg.JoinRetry)
			continue
		}
		c.reconnect(ctx)
		t.Reset(c.cfg.Reconnect)
	}
}

// reconnect joins dead members' addresses, and seeds and members last
// known that are not live members: a member deleted after its grace is in
// the view no more, but still in the store.
func (c *Cluster) reconnect(ctx context.Context) {
	live := map[string]bool{}
	var addrs []string
	for _, m := range c.view.list() {
		switch {
		case m.Self:
		case m.State.live():
			live[m.GossipAddr] = true
		case m.State == StateDead:
			addrs = append(addrs, m.GossipAddr)
		}
	}
	if len(c.cfg.Join) > 0 {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		seeds, _ := resolveSeeds(rctx, c.cfg.Join, c.resolver(), c.gossipAddr)
		cancel()
		for _, s := range seeds {
			if !live[s] {
				addrs = append(addrs, s)
			}
		}
	}
	for _, a := range c.known.list() {
		if !live[a] && a != c.gossipAddr {
			addrs = append(addrs, a)
		}
	}
	slices.Sort(addrs)
	c.joinEach(slices.Compact(addrs), "reconnecting")
}

func (c *Cluster) resolver() func(context.Context, string) ([]string, error) {
	if c.cfg.Resolve != nil {
		return c.cfg.Resolve
	}
	_, port, _ := net.SplitHostPort(c.gossipAddr)
	return systemResolver(port, c.cfg.DNSServer)
}

// Stop leaves the cluster gracefully, stops replication, closes peer
// connections and the store.
func (c *Cluster) Stop(ctx context.Context) error {
	return c.shutdown(ctx, true)
}

// Kill stops the node as a crash would: memberlist's listeners and peer
// connections close without a leave message. For tests.
func (c *Cluster) Kill() {
	_ = c.shutdown(context.Background(), false)
}

func (c *Cluster) shutdown(ctx context.Context, leave bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == stateStopped {
		return nil
	}
	wasStarted := c.state == stateStarted
	c.state = stateStopped
	var errs []error
	if wasStarted {
		if leave {
			timeout := time.Second
			if dl, ok := ctx.Deadline(); ok {
				timeout = min(timeout, time.Until(dl))
			}
			// Announce the leave in the metadata first, so peers can tell
			// it from a failure.
			c.view.setMeta(func(m *nodeMeta) { m.Leaving = true })
			if err := c.ml.UpdateNode(timeout / 2); err != nil {
				c.logLeave("announcing leave", err)
			}
			if err := c.ml.Leave(timeout / 2); err != nil {
				c.logLeave("leaving", err)
			}
		}
		if err := c.ml.Shutdown(); err != nil {
			errs = append(errs, fmt.Errorf("stopping memberlist: %w", err))
		}
		c.stopKnown()
		c.cancel()
		c.wg.Wait()
		c.repl.closeLinks()
	}
	if err := c.store.Close(); err != nil {
		errs = append(errs, fmt.Errorf("closing store: %w", err))
	}
	c.log.Info("cluster stopped", slog.Bool("left", leave))
	return errors.Join(errs...)
}

// logLeave reports a leave broadcast that did not go out in time. It is no
// error of the shutdown: memberlist only confirms a broadcast that gossip
// carried to someone, so when every peer is leaving too (a whole cluster
// stopped at once) or already gone, nobody is left to carry it; and a peer
// that stays and missed it detects the failure instead, as after a crash.
func (c *Cluster) logLeave(step string, err error) {
	if c.view.peersStaying() {
		c.log.Warn(step+": peers will notice by failure detection", slog.String("reason", err.Error()))
		return
	}
	c.log.Debug(step+": no peer stays to hear it", slog.String("reason", err.Error()))
}

func (c *Cluster) writable() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state {
	case stateNew:
		return ErrNotStarted
	case stateStopped:
		return ErrStopped
	}
	return nil
}

// SetDraining announces (or withdraws) that this node is draining.
func (c *Cluster) SetDraining(draining bool) error {
	c.view.setMeta(func(m *nodeMeta) { m.Draining = draining })
	c.mu.Lock()
	ml := c.ml
	started := c.state == stateStarted
	c.mu.Unlock()
	if !started {
		return nil
	}
	if err := ml.UpdateNode(time.Second); err != nil {
		return fmt.Errorf("announcing draining=%t: %w", draining, err)
	}
	return nil
}

// Self returns this node as a member.
func (c *Cluster) Self() Member {
	if m, ok := c.view.get(c.cfg.Name); ok && m.Epoch == c.origin.Epoch {
		return m
	}
	return Member{Name: c.cfg.Name, Epoch: c.origin.Epoch, Origin: c.origin, GRPCAddr: c.cfg.GRPCAddr,
		GossipAddr: c.cfg.GossipAddr, Version: c.cfg.Version, Self: true, Capabilities: ownCapabilities(c.cfg)}
}

// Origin returns this node's origin (name and epoch of this run).
func (c *Cluster) Origin() crdt.Origin { return c.origin }

// Members returns every member in the view, sorted by name, self included.
func (c *Cluster) Members() []Member { return c.view.list() }

// Member returns the member named name.
func (c *Cluster) Member(name string) (Member, bool) { return c.view.get(name) }

// WatchMembers calls fn for every change of a member, in order, outside the
// view's lock; fn must not block long. cancel stops the calls.
func (c *Cluster) WatchMembers(fn func(Member)) (cancel func()) { return c.view.watch(fn) }

// Ready reports whether the node has joined (reached a seed, was reached by
// a peer, or is alone with no seeds), finished its first anti-entropy
// round, pulled from every live peer at least once, and, the first time,
// is in sync (InSync): a restarted node counts the members its last run
// knew until it hears them, and refuses connections until then, so it is
// not ready either.
func (c *Cluster) Ready() bool {
	c.mu.Lock()
	started := c.state == stateStarted
	c.mu.Unlock()
	if !started || !c.aeDone.Load() {
		return false
	}
	if !c.peersSynced() {
		return false
	}
	// A node whose own seed join failed is joined all the same once a peer
	// has joined it: being a member is what counts, not who dialled whom.
	if !c.joined.Load() && c.view.livePeers() > 0 {
		c.joined.Store(true)
	}
	if !c.joined.Load() {
		return false
	}
	return c.Settled()
}

// Settled reports whether the node has been in sync (InSync) once since it
// started. A restarted node counts the members its last run knew until it
// hears them: until then it serves nothing.
func (c *Cluster) Settled() bool {
	if c.settled.Load() {
		return true
	}
	if c.InSync() != nil {
		return false
	}
	c.settled.Store(true)
	return true
}

// PeerConn returns the authenticated connection to a live peer, for the
// services added with AddService: the replication connection itself, so
// whatever transport the cluster dials carries them too. It fails for unknown, dead, departed or suspect peers.
func (c *Cluster) PeerConn(name string) (*grpc.ClientConn, error) {
	m, ok := c.view.get(name)
	if !ok || m.Self || (m.State != StateAlive && m.State != StateDraining) {
		return nil, fmt.Errorf("connecting to %s: %w", name, ErrUnknownPeer)
	}
	cc := c.repl.conn(m.Origin)
	if cc == nil {
		// The loop may not have reconciled this member yet.
		cc = c.repl.connNow(m)
	}
	if cc == nil {
		return nil, fmt.Errorf("connecting to %s: %w", name, ErrUnknownPeer)
	}
	return cc, nil
}
