package cluster

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/mcpswarm/mcpswarm/crdt"
	"github.com/mcpswarm/mcpswarm/internal/memnet"
	"github.com/mcpswarm/mcpswarm/internal/poll"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var testKey = bytes.Repeat([]byte{7}, 32)

// logBuf collects a node's logs for assertions.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// tnode is one in-process node: a Cluster, its gRPC server and registries.
type tnode struct {
	t      *testing.T
	name   string
	dir    string
	c      *Cluster
	srv    *grpc.Server
	lis    net.Listener
	net    *memnet.Network // nil: real sockets
	ep     *memnet.Node    // the node's endpoints on net
	regs   map[string]*Registry
	logs   *logBuf
	prom   *prometheus.Registry
	cfg    Config
	killed bool
}

var testRegistries = []string{"sessions", "tools"}

// startNode starts a node named name with LocalConfig, a bbolt store in
// dir (a fresh temp dir when ""), and the adjustments in opts, on nw: its
// gossip and gRPC travel over the in-memory network, with no sockets. A
// nil nw binds real loopback sockets (the benchmarks, and the one test of
// the default transport).
//
// The network is wired in before opts run, so an option that wraps the
// transport or the dialer (partNet, gate) wraps the network's: it must
// call the Memberlist and Dialer it replaces.
func startNode(tb testing.TB, nw *memnet.Network, name, dir string, opts ...func(*Config)) *tnode {
	tb.Helper()
	t, _ := tb.(*testing.T)
	if dir == "" {
		dir = tb.TempDir()
	}
	n := &tnode{t: t, name: name, dir: dir, net: nw, logs: &logBuf{}, prom: prometheus.NewRegistry(), regs: map[string]*Registry{}}
	cfg := LocalConfig()
	if nw != nil {
		n.ep = nw.Node(name)
		cfg.GRPCAddr = n.ep.GRPCAddr
		cfg.GossipAddr = n.ep.GossipAddr
		cfg.Dialer = n.ep.Dial
		timers := cfg.Memberlist
		cfg.Memberlist = func(mc *memberlist.Config) {
			timers(mc)
			mc.Transport = n.ep.Transport() // one per start: memberlist shuts it down
		}
	}
	lis, err := n.listen(cfg.GRPCAddr)
	if err != nil {
		tb.Fatal(err)
	}
	n.lis = lis
	if nw == nil {
		cfg.GRPCAddr = lis.Addr().String()
	}
	cfg.Name = name
	cfg.Key = testKey
	cfg.DataDir = dir
	cfg.NoSync = true
	cfg.Logger = slog.New(slog.NewTextHandler(n.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.Registerer = n.prom
	for _, o := range opts {
		o(&cfg)
	}
	n.cfg = cfg
	c, err := New(cfg)
	if err != nil {
		_ = lis.Close()
		tb.Fatal(err)
	}
	n.c = c
	for _, r := range testRegistries {
		reg, err := c.Registry(r)
		if err != nil {
			tb.Fatal(err)
		}
		n.regs[r] = reg
	}
	n.srv = grpc.NewServer(c.ServerOptions()...)
	c.Register(n.srv)
	go func() { _ = n.srv.Serve(lis) }()
	if err := c.Start(context.Background()); err != nil {
		n.srv.Stop()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		// A crash, not a leave: a graceful stop waits up to a second for
		// gossip to carry the leave, which no test here reads after its
		// end (those that test leaving stop their nodes themselves).
		if !n.killed {
			n.kill()
		}
		if tb.Failed() {
			tb.Logf("logs of %s:\n%s", name, tail(n.logs.String(), 60))
		}
	})
	return n
}

// listen opens a listener for the node's gRPC server at addr: a fresh one
// on the node's network, a loopback socket otherwise (port 0: any).
func (n *tnode) listen(addr string) (net.Listener, error) {
	if n.ep != nil {
		return n.ep.ListenGRPC()
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	return net.Listen("tcp", addr)
}

// dialClient dials a node's gRPC address as a client outside the cluster
// would (grpc.WithContextDialer).
func (n *tnode) dialClient(ctx context.Context, addr string) (net.Conn, error) {
	if n.net != nil {
		return n.net.DialClient(ctx, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

func tail(s string, lines int) string {
	parts := strings.Split(s, "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

func (n *tnode) stop() {
	if n.killed {
		return
	}
	n.killed = true
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = n.c.Stop(ctx)
	n.srv.Stop()
}

// kill simulates a crash: no leave, listeners closed.
func (n *tnode) kill() {
	if n.killed {
		return
	}
	n.killed = true
	n.c.Kill()
	n.srv.Stop()
}

func (n *tnode) gossip() string { return n.c.Self().GossipAddr }

func joinTo(seed *tnode) func(*Config) {
	return func(c *Config) { c.Join = []string{seed.gossip()} }
}

// startCluster starts n nodes joined to the first, on a network of their
// own (nodes[0].net).
func startCluster(t *testing.T, n int, opts ...func(*Config)) []*tnode {
	t.Helper()
	return startClusterOn(t, memnet.New(), n, opts...)
}

// startClusterOn starts n nodes joined to the first on nw (nil: sockets).
func startClusterOn(t *testing.T, nw *memnet.Network, n int, opts ...func(*Config)) []*tnode {
	t.Helper()
	nodes := []*tnode{startNode(t, nw, "n0", "", opts...)}
	for i := 1; i < n; i++ {
		nodes = append(nodes, startNode(t, nw, fmt.Sprintf("n%d", i), "", append([]func(*Config){joinTo(nodes[0])}, opts...)...))
	}
	awaitMembers(t, nodes, 20*time.Second)
	return nodes
}

// awaitMembers waits until every node sees every other as alive.
func awaitMembers(t testing.TB, nodes []*tnode, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, func() error {
		for _, n := range nodes {
			for _, o := range nodes {
				m, ok := n.c.Member(o.name)
				if !ok || m.State != StateAlive || m.Origin != o.c.Origin() {
					return fmt.Errorf("%s sees %s as %+v (present %t)", n.name, o.name, m, ok)
				}
			}
		}
		return nil
	})
}

// eventually waits until cond returns nil, failing t with cond's last
// error if timeout passes first.
func eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	poll.Until(t, timeout, "the condition holds", cond)
}

// dump renders a registry's visible entries, one "origin key=value" line
// each, in order.
func dump(r *Registry) string {
	var b strings.Builder
	r.Range(func(e crdt.Entry) bool {
		fmt.Fprintf(&b, "%s %s=%s\n", e.Origin, e.Key, e.Value)
		return true
	})
	return b.String()
}

// converged reports an error unless every node's registries equal want's
// (or the first node's when want is nil).
func converged(nodes []*tnode, want map[string]string) error {
	for _, reg := range testRegistries {
		ref := dump(nodes[0].regs[reg])
		if w, ok := want[reg]; ok && ref != w {
			return fmt.Errorf("%s on %s:\n%s\nwant:\n%s", reg, nodes[0].name, ref, w)
		}
		for _, n := range nodes[1:] {
			if got := dump(n.regs[reg]); got != ref {
				return fmt.Errorf("%s differs between %s and %s:\n%s\nvs\n%s", reg, nodes[0].name, n.name, ref, got)
			}
		}
	}
	return nil
}

// metric returns the sum of the samples of the named metric family whose
// labels include labels.
func metric(t testing.TB, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				sum += m.GetCounter().GetValue()
			case m.Gauge != nil:
				sum += m.GetGauge().GetValue()
			case m.Histogram != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, kv []string) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == kv[i] && l.GetValue() == kv[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}
