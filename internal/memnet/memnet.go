// Package memnet is an in-memory network for multi-node tests: channels
// carry gossip (a memberlist.Transport), grpc's bufconn carries gRPC and
// HTTP, and any node can be cut off from the others and healed. No
// sockets, no ports. A Node satisfies the root package's Network hook
// (mcpswarm.WithNetwork).
//
// memberlist's own MockNetwork is not used: its unbuffered channels block a
// sender forever once the receiving node has stopped, which leaks
// goroutines in tests that stop or kill nodes; here a packet to a stopped
// or busy node is dropped, as UDP would.
//
// It only moves bytes: memberlist's own timers (probes, suspicion) keep
// running on wall time, as do gRPC's.
package memnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/memberlist"
	"google.golang.org/grpc/test/bufconn"
)

// ErrCut is what a cut node's dials and writes fail with.
var ErrCut = errors.New("memnet: link cut")

// DefaultBuffer is each gRPC connection's buffer in either direction,
// as New makes them. bufconn allocates it whole when a connection opens,
// on the Go heap, where a kernel's socket buffers would not be.
const DefaultBuffer = 1 << 20

// Network connects a fixed set of named nodes.
type Network struct {
	mu    sync.Mutex
	nodes map[string]*Node // by name
	addrs map[string]*Node // gossip, gRPC and HTTP addresses → node
	cut   map[string]bool
	conns map[*conn]bool
	ends  map[string]*endpoint // the running gossip endpoint per node name
	lns   map[string]dialable  // the listener per gRPC and HTTP address, the latest Listen's
	buf   int                  // each gRPC connection's buffer, per direction

	clientOnce sync.Once
	client     *http.Transport
}

// Node is one node's endpoints.
type Node struct {
	net  *Network
	name string
	// GRPCAddr is the node's gRPC address, as peers dial it.
	GRPCAddr string
	// GossipAddr is the node's memberlist address, for Join lists.
	GossipAddr string
	// HTTPAddr is the node's HTTP address, as clients dial it
	// (Network.DialClient).
	HTTPAddr string
	index    int
	sent     counters
}

// New makes a network of the named nodes; Node adds more.
func New(names ...string) *Network { return NewBuffered(DefaultBuffer, names...) }

// NewBuffered is New with gRPC connections of buf bytes each way: a
// swarm of many nodes in one process, whose heap is measured, keeps them
// small.
func NewBuffered(buf int, names ...string) *Network {
	n := &Network{nodes: map[string]*Node{}, addrs: map[string]*Node{}, cut: map[string]bool{}, conns: map[*conn]bool{},
		ends: map[string]*endpoint{}, lns: map[string]dialable{}, buf: buf}
	for _, name := range names {
		n.Node(name)
	}
	return n
}

// Addr is an address on the network.
type Addr string

// Network is "memnet" (net.Addr).
func (Addr) Network() string { return "memnet" }

func (a Addr) String() string { return string(a) }

// dialable is a listener a peer or client dials.
type dialable interface {
	DialContext(ctx context.Context) (net.Conn, error)
}

// listener is a bufconn listener that reports its network address.
type listener struct {
	*bufconn.Listener
	addr Addr
}

func (l listener) Addr() net.Addr { return l.addr }

// pipeListener hands out net.Pipe connections. HTTP runs on it rather
// than on bufconn: net/http aborts a pending read by setting a deadline in
// the past, which bufconn applies from a timer goroutine that can fire
// after the deadline was cleared again, failing a later read of a
// keep-alive connection (a request answered with an empty 200).
type pipeListener struct {
	addr  Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return l.addr }

func (l *pipeListener) DialContext(ctx context.Context) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
	case <-ctx.Done():
	}
	_ = client.Close()
	_ = server.Close()
	return nil, errors.New("the listener is closed")
}

// ListenGRPC returns a fresh listener for the node's inbound gRPC
// connections (serve its grpc.Server on it); its Addr is GRPCAddr. A
// node's listeners close when it stops; a restarted node listens anew.
func (nd *Node) ListenGRPC() (net.Listener, error) {
	ln := bufconn.Listen(nd.net.buf)
	nd.net.setListener(nd.GRPCAddr, ln)
	return listener{Listener: ln, addr: Addr(nd.GRPCAddr)}, nil
}

// ListenHTTP returns a fresh listener for the node's HTTP server; its
// Addr is HTTPAddr.
func (nd *Node) ListenHTTP() (net.Listener, error) {
	ln := &pipeListener{addr: Addr(nd.HTTPAddr), conns: make(chan net.Conn), done: make(chan struct{})}
	nd.net.setListener(nd.HTTPAddr, ln)
	return ln, nil
}

// setListener makes ln the listener that dials to addr reach.
func (n *Network) setListener(addr string, ln dialable) {
	n.mu.Lock()
	n.lns[addr] = ln
	n.mu.Unlock()
}

// Network returns the network the node is on.
func (nd *Node) Network() *Network { return nd.net }

// HTTPTransport returns the network's HTTP client transport: it dials
// with DialClient, one per network so that connections are reused. Call
// its CloseIdleConnections when the test ends.
func (n *Network) HTTPTransport() *http.Transport {
	n.clientOnce.Do(func() {
		n.client = &http.Transport{
			DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
				return n.DialClient(ctx, addr)
			},
			MaxIdleConnsPerHost: 16,
		}
	})
	return n.client
}

// DialClient dials a node's HTTP or gRPC address from outside the
// cluster, as a client would: a cut does not stop it, since a partition
// separates the nodes from each other, and a client may sit on either
// side (the point of a test that writes to a cut-off owner).
func (n *Network) DialClient(ctx context.Context, addr string) (net.Conn, error) {
	n.mu.Lock()
	ln := n.lns[addr]
	n.mu.Unlock()
	if ln == nil {
		return nil, fmt.Errorf("memnet: dialing %s: nothing listens there: %w", addr, syscall.ECONNREFUSED)
	}
	c, err := ln.DialContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("memnet: dialing %s: %v: %w", addr, err, syscall.ECONNREFUSED)
	}
	return c, nil
}

// Node returns the endpoints of node name, adding the node to the
// network the first time.
func (n *Network) Node(name string) *Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	if nd, ok := n.nodes[name]; ok {
		return nd
	}
	i := len(n.nodes) + 1
	// Gossip addresses must be IP:port: memberlist parses them.
	nd := &Node{net: n, name: name, index: i, GRPCAddr: "grpc-" + name + ":1", HTTPAddr: "http-" + name + ":1",
		GossipAddr: fmt.Sprintf("127.0.0.1:%d", 10000+i)}
	n.nodes[name] = nd
	n.addrs[nd.GRPCAddr] = nd
	n.addrs[nd.GossipAddr] = nd
	n.addrs[nd.HTTPAddr] = nd
	return nd
}

// at returns the node at addr.
func (n *Network) at(addr string) (*Node, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	nd, ok := n.addrs[addr]
	return nd, ok
}

// Cut partitions node name from every other node (heal: reconnects it):
// its gossip is dropped, its gRPC dials fail and its open gRPC connections
// are closed.
func (n *Network) Cut(name string, cut bool) {
	n.mu.Lock()
	n.cut[name] = cut
	var doomed []*conn
	if cut {
		for c := range n.conns {
			if c.from == name || c.to == name {
				doomed = append(doomed, c)
			}
		}
	}
	n.mu.Unlock()
	for _, c := range doomed {
		_ = c.Close()
	}
}

// blocked reports whether traffic between from and the node at addr is cut.
func (n *Network) blocked(from, addr string) bool {
	n.mu.Lock()
	to, ok := n.addrs[addr]
	defer n.mu.Unlock()
	return n.cut[from] || (ok && n.cut[to.name])
}

// Transport returns a fresh memberlist transport for the node (one per
// start: memberlist shuts it down when the node stops): set it as
// memberlist.Config.Transport.
func (nd *Node) Transport() memberlist.Transport {
	e := &endpoint{nd: nd, packets: make(chan *memberlist.Packet, 256), streams: make(chan net.Conn), done: make(chan struct{})}
	nd.net.mu.Lock()
	nd.net.ends[nd.name] = e
	nd.net.mu.Unlock()
	return e
}

// Dial dials a peer's gRPC address over the network: set it as the
// node's gRPC dialer.
func (nd *Node) Dial(ctx context.Context, addr string) (net.Conn, error) {
	n := nd.net
	to, ok := n.at(addr)
	if !ok {
		return nil, fmt.Errorf("memnet: no node at %s", addr)
	}
	if n.blocked(nd.name, addr) {
		return nil, fmt.Errorf("dialing %s: %w", addr, ErrCut)
	}
	n.mu.Lock()
	ln := n.lns[addr]
	n.mu.Unlock()
	if ln == nil {
		return nil, fmt.Errorf("dialing %s: nothing listens there: %w", addr, syscall.ECONNREFUSED)
	}
	c, err := ln.DialContext(ctx)
	if err != nil {
		// Its listener is closed: the node is down, as a refused TCP dial.
		return nil, fmt.Errorf("dialing %s: %v: %w", addr, err, syscall.ECONNREFUSED)
	}
	wc := &conn{Conn: c, net: n, from: nd.name, to: to.name, sender: nd}
	n.mu.Lock()
	if n.cut[nd.name] || n.cut[to.name] {
		// Cut while dialing: Cut did not see this connection.
		n.mu.Unlock()
		_ = c.Close()
		return nil, fmt.Errorf("dialing %s: %w", addr, ErrCut)
	}
	n.conns[wc] = true
	n.mu.Unlock()
	return wc, nil
}

// endpoint is one running node's gossip transport.
type endpoint struct {
	nd       *Node
	packets  chan *memberlist.Packet
	streams  chan net.Conn
	done     chan struct{}
	shutdown sync.Once
}

// peer returns the running endpoint at addr, or nil when the traffic is
// cut or nobody runs there.
func (e *endpoint) peer(addr string) *endpoint {
	n := e.nd.net
	to, ok := n.at(addr)
	if !ok || n.blocked(e.nd.name, addr) {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ends[to.name]
}

func (e *endpoint) FinalAdvertiseAddr(string, int) (net.IP, int, error) {
	host, port, _ := net.SplitHostPort(e.nd.GossipAddr)
	p, err := net.LookupPort("tcp", port)
	return net.ParseIP(host), p, err
}

// WriteTo delivers a packet, or drops it (cut, stopped or full), as UDP.
func (e *endpoint) WriteTo(b []byte, addr string) (time.Time, error) {
	now := time.Now()
	to := e.peer(addr)
	if to == nil {
		return now, nil
	}
	e.nd.sent.gossip(len(b))
	from := &net.UDPAddr{IP: net.ParseIP("127.0.0.1"), Port: 10000 + e.nd.index}
	select {
	case to.packets <- &memberlist.Packet{Buf: append([]byte(nil), b...), From: from, Timestamp: now}:
	case <-to.done:
	default:
	}
	return now, nil
}

func (e *endpoint) PacketCh() <-chan *memberlist.Packet { return e.packets }

// DialTimeout opens a stream to the node at addr.
func (e *endpoint) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	to := e.peer(addr)
	if to == nil {
		return nil, fmt.Errorf("dialing %s: %w", addr, ErrCut)
	}
	local, remote := net.Pipe()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case to.streams <- countingStream{remote, &to.nd.sent}:
		return countingStream{local, &e.nd.sent}, nil
	case <-to.done:
	case <-e.done:
	case <-t.C:
	}
	_ = local.Close()
	_ = remote.Close()
	return nil, fmt.Errorf("dialing %s: %w", addr, ErrCut)
}

func (e *endpoint) StreamCh() <-chan net.Conn { return e.streams }

func (e *endpoint) Shutdown() error {
	e.shutdown.Do(func() { close(e.done) })
	return nil
}

// conn is a gRPC connection Cut can close; its writes count as sent by
// the dialing node.
type conn struct {
	net.Conn
	net      *Network
	from, to string
	sender   *Node
	once     sync.Once
}

func (c *conn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.sender.sent.grpc(n)
	}
	return n, err
}

func (c *conn) Close() error {
	c.once.Do(func() {
		c.net.mu.Lock()
		delete(c.net.conns, c)
		c.net.mu.Unlock()
	})
	return c.Conn.Close()
}

// Conns returns the gRPC connections open between the nodes (each
// counted once, at its dialer).
func (n *Network) Conns() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.conns)
}

// Traffic is what a node sent: gRPC bytes and writes (each write one
// flush of gRPC's transport, a frame or a few), and gossip bytes and
// messages (memberlist packets and stream writes).
type Traffic struct {
	GRPCBytes, GRPCWrites       int64
	GossipBytes, GossipMessages int64
}

// Add returns the sum of t and o.
func (t Traffic) Add(o Traffic) Traffic {
	return Traffic{t.GRPCBytes + o.GRPCBytes, t.GRPCWrites + o.GRPCWrites, t.GossipBytes + o.GossipBytes, t.GossipMessages + o.GossipMessages}
}

// Sub returns t minus o: the traffic between two readings.
func (t Traffic) Sub(o Traffic) Traffic {
	return Traffic{t.GRPCBytes - o.GRPCBytes, t.GRPCWrites - o.GRPCWrites, t.GossipBytes - o.GossipBytes, t.GossipMessages - o.GossipMessages}
}

type counters struct {
	grpcBytes, grpcWrites, gossipBytes, gossipMsgs atomic.Int64
}

func (c *counters) grpc(n int) {
	c.grpcBytes.Add(int64(n))
	c.grpcWrites.Add(1)
}

func (c *counters) gossip(n int) {
	c.gossipBytes.Add(int64(n))
	c.gossipMsgs.Add(1)
}

// Sent returns what node name has sent since it was added. gRPC bytes a
// node's server sends are counted only when it serves on Node.Serving.
func (n *Network) Sent(name string) Traffic {
	c := &n.Node(name).sent
	return Traffic{c.grpcBytes.Load(), c.grpcWrites.Load(), c.gossipBytes.Load(), c.gossipMsgs.Load()}
}

// SentTotal is Sent summed over every node.
func (n *Network) SentTotal() Traffic {
	n.mu.Lock()
	names := make([]string, 0, len(n.nodes))
	for name := range n.nodes {
		names = append(names, name)
	}
	n.mu.Unlock()
	var t Traffic
	for _, name := range names {
		t = t.Add(n.Sent(name))
	}
	return t
}

// Serving is ListenGRPC with what the node's server writes on accepted
// connections counted as sent by the node (Network.Sent).
func (nd *Node) Serving() (net.Listener, error) {
	ln, err := nd.ListenGRPC()
	if err != nil {
		return nil, err
	}
	return countingListener{ln, &nd.sent}, nil
}

type countingListener struct {
	net.Listener
	sent *counters
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{c, l.sent}, nil
}

// countingConn counts its writes as sent by the node that holds it.
type countingConn struct {
	net.Conn
	sent *counters
}

func (c countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.sent.grpc(n)
	}
	return n, err
}

// countingStream counts a gossip stream's writes.
type countingStream struct {
	net.Conn
	sent *counters
}

func (c countingStream) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.sent.gossip(n)
	}
	return n, err
}
