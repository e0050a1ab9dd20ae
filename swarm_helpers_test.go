package mcpswarm_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm"
	"github.com/mcpswarm/mcpswarm/internal/memnet"
	"github.com/mcpswarm/mcpswarm/internal/poll"
	"github.com/mcpswarm/mcpswarm/session"
)

// The tokens of the test principals; the policy stores their hashes.
const (
	aliceToken = "alice-test-token"
	bobToken   = "bob-test-token"
	adaToken   = "ada-admin-test-token"
)

func sha(s string) string { sum := sha256.Sum256([]byte(s)); return hex.EncodeToString(sum[:]) }

// testPolicy allows every tool and read for the three token principals,
// except that clicking submit in a session whose id starts with "ask"
// asks the user first.
func testPolicy(t testing.TB, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "policy.yaml")
	doc := fmt.Sprintf(`name: swarm-test
tokens:
  - {sha256: %q, subject: alice}
  - {sha256: %q, subject: bob}
  - {sha256: %q, subject: ada, roles: [admin]}
tools:
  - match: {tools: ["ask*.submit.click"]}
    ask: "{principal} wants to run {tool}"
  - allow: true
reads:
  - allow: true
`, sha(aliceToken), sha(bobToken), sha(adaToken))
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// swarmEnv is a set of in-process nodes sharing a key and a policy, on
// one in-memory network (memnet) unless sockets is set.
type swarmEnv struct {
	t testing.TB
	// net carries every node's gossip, gRPC and HTTP: no ports, and cut
	// partitions a node from the others.
	net *memnet.Network
	// sockets, when set before the first start, runs the nodes on
	// loopback sockets instead: for tests that reach a node the way only
	// a socket can (raw TCP, pprof, a load balancer in front).
	sockets bool
	dir     string
	keyFile string
	policy  string
	nodes   map[string]*mcpswarm.Node
	dataDir map[string]string
	// tls, when set, puts every node's gRPC under mutual TLS.
	tls mcpswarm.TLSFiles
	// apps registers extra apps on every node, startable with the demos.
	apps      func(*session.Registry) error
	startable []string
	// conformance registers the conformance suite's fixture on every node.
	conformance bool
	// tweak, when set, changes every node's config before it starts.
	tweak func(*mcpswarm.Config)
	// quiet stops node logs reaching t.Logf once the test is over:
	// memberlist's probe goroutine may log a last line while it shuts down.
	quiet *atomic.Bool
}

func newSwarmEnv(t testing.TB) *swarmEnv {
	t.Helper()
	dir := t.TempDir()
	key, err := mcpswarm.GenerateClusterKey()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "cluster.key")
	if err := os.WriteFile(keyFile, []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &swarmEnv{t: t, dir: dir, keyFile: keyFile, policy: testPolicy(t, dir), nodes: map[string]*mcpswarm.Node{}, dataDir: map[string]string{}, quiet: new(atomic.Bool),
		net: memnet.New()}
	t.Cleanup(func() {
		// A crash, not a graceful stop: a stop drains (hands sessions to
		// nodes that are about to go too) and waits for gossip to carry
		// the leave, which nothing reads after the test. Tests of stopping
		// stop their nodes themselves.
		for name := range e.nodes {
			e.kill(name)
		}
		e.net.HTTPTransport().CloseIdleConnections()
		e.quiet.Store(true)
	})
	return e
}

// limit makes the nodes e starts from now on read the test policy with
// limits, a YAML "limits:" section, appended.
func (e *swarmEnv) limit(limits string) {
	e.t.Helper()
	base, err := os.ReadFile(e.policy)
	if err != nil {
		e.t.Fatal(err)
	}
	e.policy = filepath.Join(e.dir, fmt.Sprintf("limited-%d.yaml", len(e.nodes)))
	if err := os.WriteFile(e.policy, append(base, limits...), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// start starts node name, joining join (a gossip address) when given.
func (e *swarmEnv) start(name string, join ...string) *mcpswarm.Node {
	e.t.Helper()
	cfg := mcpswarm.DefaultConfig()
	cfg.Name = name
	cfg.HTTPAddr, cfg.GRPCAddr, cfg.GossipAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	if e.dataDir[name] == "" {
		e.dataDir[name] = filepath.Join(e.dir, name)
	}
	cfg.DataDir = e.dataDir[name]
	cfg.PolicyFile = e.policy
	cfg.ClusterKeyFile = e.keyFile
	cfg.Join = join
	cfg.TLS = e.tls
	cfg.Conformance = e.conformance
	cfg.DeadGrace = 3 * time.Second
	cfg.ShutdownTimeout = 5 * time.Second
	if e.tweak != nil {
		e.tweak(&cfg)
	}
	log := slog.New(slog.NewTextHandler(testWriter{e.t, name, e.quiet}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := []mcpswarm.Option{mcpswarm.WithLogger(log)}
	if !e.sockets {
		ep := e.net.Node(name)
		cfg.GossipAddr = ep.GossipAddr
		opts = append(opts, mcpswarm.WithNetwork(ep))
	}
	if e.apps != nil {
		opts = append(opts, mcpswarm.WithApps(e.apps))
		cfg.Startable = e.startable
	}
	n, err := mcpswarm.NewNode(cfg, opts...)
	if err != nil {
		e.t.Fatalf("new node %s: %v", name, err)
	}
	if err := n.Start(context.Background()); err != nil {
		e.t.Fatalf("starting node %s: %v", name, err)
	}
	e.nodes[name] = n
	return n
}

// cluster starts k nodes, node1 first and the others joining it, and waits
// until every node lists all of them alive.
func (e *swarmEnv) cluster(k int) []*mcpswarm.Node {
	e.t.Helper()
	first := e.start("node1")
	out := []*mcpswarm.Node{first}
	for i := 2; i <= k; i++ {
		out = append(out, e.start(fmt.Sprintf("node%d", i), first.GossipAddr()))
	}
	for _, n := range out {
		n := n
		eventually(e.t, 10*time.Second, "every node sees all members alive", func() bool {
			return n.AliveMembers() == k
		})
	}
	return out
}

func (e *swarmEnv) stopAll() {
	for name, n := range e.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := n.Stop(ctx); err != nil {
			e.t.Logf("stopping %s: %v", name, err)
		}
		cancel()
	}
	e.nodes = map[string]*mcpswarm.Node{}
}

// kill crashes a node: listeners close, no leave.
func (e *swarmEnv) kill(name string) {
	e.nodes[name].Kill()
	delete(e.nodes, name)
}

// cut partitions node name from every other node: its gossip is dropped
// and its peer connections close. Clients still reach it.
func (e *swarmEnv) cut(name string) { e.net.Cut(name, true) }

// heal reconnects a node cut off by cut.
func (e *swarmEnv) heal(name string) { e.net.Cut(name, false) }

// httpClient returns a client that reaches n's HTTP address (and its
// peers'), over the in-memory network when n runs on one.
func httpClient(n *mcpswarm.Node) *http.Client {
	return &http.Client{Transport: httpTransport(n)}
}

// httpTransport is httpClient's transport: the network's when n runs on
// the in-memory one (its idle connections close with the test's env).
func httpTransport(n *mcpswarm.Node) http.RoundTripper {
	ep, ok := mcpswarm.NetworkOf(n).(*memnet.Node)
	if !ok {
		return http.DefaultTransport
	}
	return ep.Network().HTTPTransport()
}

type testWriter struct {
	t     testing.TB
	name  string
	quiet *atomic.Bool
}

func (w testWriter) Write(p []byte) (int, error) {
	if w.quiet.Load() {
		return len(p), nil
	}
	w.t.Logf("[%s] %s", w.name, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	await(t, timeout, what, func() error {
		if cond() {
			return nil
		}
		return errors.New("not yet")
	})
}

// await polls cond until it returns nil or the timeout passes, and then
// fails the test with cond's last answer. What it waits for (a replicated
// record, memberlist's verdict) has no event a test can subscribe to
// across nodes.
func await(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	poll.Until(t, timeout, what, cond)
}

// notes collects a client's notifications.
type notes struct{ ch chan mcp.JSONRPCNotification }

func (n *notes) count(method string) int {
	k := 0
	for {
		select {
		case x := <-n.ch:
			if x.Method == method {
				k++
			}
		default:
			return k
		}
	}
}

type conn struct {
	*client.Client
	t     testing.TB
	notes *notes
	id    string
}

type connOpts struct {
	token     string
	sessionID string
	listen    bool
	elicit    client.ElicitationHandler
}

// connect opens an mcp-go Streamable HTTP client to node n, pinned to the
// session-based revision 2025-11-25.
func connect(t testing.TB, n *mcpswarm.Node, o connOpts) *conn {
	t.Helper()
	c, err := tryConnect(t, n, o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tryConnect is connect that returns the failure to initialize, for a node that
// may not serve connections yet (one catching up after a partition).
func tryConnect(t testing.TB, n *mcpswarm.Node, o connOpts) (*conn, error) {
	var topts []transport.StreamableHTTPCOption
	if o.token != "" {
		topts = append(topts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + o.token}))
	}
	if o.sessionID != "" {
		topts = append(topts, transport.WithSession(o.sessionID))
	}
	if o.listen {
		topts = append(topts, transport.WithContinuousListening())
	}
	topts = append(topts, transport.WithHTTPBasicClient(httpClient(n)))
	tr, err := transport.NewStreamableHTTP("http://"+n.HTTPAddr()+"/mcp", topts...)
	if err != nil {
		return nil, err
	}
	copts := []client.ClientOption{client.WithProtocolVersion(mcp.ProtocolVersion20251125)}
	if o.sessionID != "" {
		copts = append(copts, client.WithSession())
	}
	if o.elicit != nil {
		copts = append(copts, client.WithElicitationHandler(o.elicit))
	}
	c := client.NewClient(tr, copts...)
	ns := &notes{ch: make(chan mcp.JSONRPCNotification, 1024)}
	c.OnNotification(func(x mcp.JSONRPCNotification) {
		select {
		case ns.ch <- x:
		default:
		}
	})
	if err := c.Start(context.Background()); err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = c.Close() })
	if o.sessionID == "" {
		req := mcp.InitializeRequest{}
		req.Params.ClientInfo = mcp.Implementation{Name: "swarm-test", Version: "1"}
		if o.elicit != nil {
			req.Params.Capabilities.Elicitation = &mcp.ElicitationCapability{}
		}
		if _, err := c.Initialize(context.Background(), req); err != nil {
			return nil, fmt.Errorf("initialize on %s: %w", n.HTTPAddr(), err)
		}
	}
	return &conn{Client: c, t: t, notes: ns, id: tr.GetSessionId()}, nil
}

func (c *conn) call(name string, args map[string]any) *mcp.CallToolResult {
	c.t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		c.t.Fatalf("calling %s: %v", name, err)
	}
	return res
}

func (c *conn) tools() map[string]bool {
	c.t.Helper()
	res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		c.t.Fatalf("listing tools: %v", err)
	}
	out := map[string]bool{}
	for _, x := range res.Tools {
		out[x.Name] = true
	}
	return out
}

func textOf(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// listed returns the sessions swarm_list shows the caller: id → owner node.
func (c *conn) listed() map[string]string {
	c.t.Helper()
	res := c.call("swarm_list", nil)
	if res.IsError {
		c.t.Fatalf("swarm_list: %s", textOf(res))
	}
	var v struct {
		Sessions []struct {
			ID    string `json:"id"`
			Owner string `json:"owner"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(textOf(res)), &v); err != nil {
		c.t.Fatalf("decoding swarm_list %q: %v", textOf(res), err)
	}
	out := map[string]string{}
	for _, s := range v.Sessions {
		out[s.ID] = s.Owner
	}
	return out
}

// post sends body to node n's /mcp as c's connection (its session id,
// 2025-11-25), whichever node c was opened on.
func (c *conn) post(n *mcpswarm.Node, body string) (*http.Response, error) {
	req, _ := http.NewRequest(http.MethodPost, "http://"+n.HTTPAddr()+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.id)
	req.Header.Set("Mcp-Protocol-Version", mcp.ProtocolVersion20251125)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	return httpClient(n).Do(req)
}

// callInBackground posts body to n as c and delivers the whole answer (or
// the error) on the channel once it comes.
func (c *conn) callInBackground(n *mcpswarm.Node, body string) <-chan string {
	answered := make(chan string, 1)
	go func() {
		resp, err := c.post(n, body)
		if err != nil {
			answered <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answered <- string(b)
	}()
	return answered
}
