package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/mcp/seal"
	"github.com/mcpswarm/mcpswarm/session"
	"github.com/mcpswarm/mcpswarm/session/apps"
)

// TestAnyNodeServesAnyConnection runs two fronts sharing the session key
// and one backend (standing in for the replicated view): a connection
// initialised on n1 is served on n2 with the same view, an id nobody minted
// is refused on both, and list_changed reaches the connection once, from
// the node the (test) registry says holds its stream.
func TestAnyNodeServesAnyConnection(t *testing.T) {
	reg := session.NewRegistry()
	if err := apps.Register(reg); err != nil {
		t.Fatal(err)
	}
	mgr, err := session.NewManager(session.ManagerConfig{Registry: reg, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	backend := NewLocalBackend("n1", mgr)
	var mu sync.Mutex
	holder := map[string]string{} // connection → node holding its GET
	var fronts []*Server
	var urls []string
	for _, node := range []string{"n1", "n2"} {
		node := node
		var srv *Server
		srv, err = New(Config{Node: node, Backend: backend, Guard: authz.DevGuard(), SessionKey: testKey,
			Logger: quietLogger(), Keepalive: time.Hour,
			Cluster: &testCluster{notifyHere: func(id string) bool {
				mu.Lock()
				defer mu.Unlock()
				h, ok := holder[id]
				return !ok && node == "n1" || h == node
			}}})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(srv.Handler())
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(ctx)
			ts.CloseClientConnections()
			ts.Close()
		})
		fronts = append(fronts, srv)
		urls = append(urls, ts.URL)
	}
	t.Cleanup(func() { _ = mgr.Close(context.Background()) })
	n1 := &testEnv{srv: fronts[0], url: urls[0], mgr: mgr}
	n2 := &testEnv{srv: fronts[1], url: urls[1], mgr: mgr}

	a, an := n1.connect(t, clientOpts{})
	id := a.GetSessionId()
	if c, err := fronts[1].SessionIDs().Open(id, ""); err != nil || c.Node != "n1" {
		t.Fatalf("n2 opening n1's id: %+v %v", c, err)
	}
	if r := callTool(t, a, "swarm_start", map[string]any{"app": "counter", "id": "tn"}); r.IsError {
		t.Fatal(text(r))
	}
	// The same connection through n2 (a load balancer moved it).
	moved, movedPosts := n2.connect(t, clientOpts{sessionID: id})
	movedNotes := openGET(t, n2.url, id)
	if !toolNames(t, moved)["tn.inc.click"] {
		t.Fatal("n2 does not serve the connection's view")
	}
	if r := callTool(t, moved, "tn.inc.click", nil); r.IsError {
		t.Fatalf("call through n2: %s", text(r))
	}
	// n2 now holds the connection's GET stream; the registry says so.
	if !fronts[1].HoldsStream(id) || fronts[0].HoldsStream(id) {
		t.Fatal("the GET stream is not recorded on n2 alone")
	}
	mu.Lock()
	holder[id] = "n2"
	mu.Unlock()
	if err := a.Ping(context.Background()); err != nil { // drain what n1 queued so far
		t.Fatal(err)
	}
	base := an.count("notifications/tools/list_changed")
	if r := callTool(t, moved, "swarm_start", map[string]any{"app": "counter", "id": "tm"}); r.IsError {
		t.Fatal(text(r))
	}
	// n2 delivers it on the GET stream or, when the call's own POST stream
	// is still open, on that one: once to the connection either way.
	const lc = "notifications/tools/list_changed"
	deadline := time.After(5 * time.Second)
	for movedNotes.count(lc)+movedPosts.count(lc) < 1 {
		select {
		case <-movedNotes.ch:
		case <-movedPosts.ch:
		case <-deadline:
			t.Fatal("list_changed never reached the moved connection")
		}
	}
	if err := a.Ping(context.Background()); err != nil { // a POST to n1 would carry a duplicate
		t.Fatal(err)
	}
	if err := moved.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := movedNotes.count(lc) + movedPosts.count(lc); got != 1 {
		t.Errorf("list_changed delivered %d times through n2", got)
	}
	// Changes before n2 held the stream went out from n1, the home node;
	// the one after only from n2.
	if got := an.count("notifications/tools/list_changed"); got != base {
		t.Errorf("n1 delivered %d more list_changed", got-base)
	}
	// An id nobody minted is refused on both nodes.
	other, _ := seal.NewSessionIDs([]byte("another-key-another-key-another-"), "n1")
	for _, e := range []*testEnv{n1, n2} {
		h := map[string]string{headerSessionID: other.Mint(""), headerProtocolVersion: mcp.ProtocolVersion20251125}
		if st, _ := e.rawPost(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, h); st != http.StatusNotFound {
			t.Errorf("unminted id: %d", st)
		}
	}
}

// openGET opens a Streamable HTTP GET stream for connection id and collects
// the notifications it carries.
func openGET(t *testing.T, url, id string) *notes {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/mcp", nil)
	req.Header.Set(headerSessionID, id)
	req.Header.Set(headerProtocolVersion, mcp.ProtocolVersion20251125)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	n := newNotes()
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var m mcp.JSONRPCNotification
			if json.Unmarshal([]byte(data), &m) == nil && m.Method != "" {
				n.add(m)
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
		<-done
	})
	return n
}

// answersTo sends JSON-RPC responses (a client's elicitation answers) to
// another node, as a load balancer without affinity would.
type answersTo struct {
	target *url.URL
	next   http.RoundTripper
}

func (a answersTo) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && r.Body != nil {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		var env struct {
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(b, &env) == nil && env.Method == "" && len(env.Result) > 0 {
			r = r.Clone(r.Context())
			r.Body = io.NopCloser(bytes.NewReader(b))
			r.URL.Host, r.Host = a.target.Host, a.target.Host
		}
	}
	return a.next.RoundTrip(r)
}

// TestElicitationAnswerForwardedToTheParkingNode: the call parks on n1, the
// client's approval lands on n2, n2 forwards it and n1 runs the call.
func TestElicitationAnswerForwardedToTheParkingNode(t *testing.T) {
	reg := session.NewRegistry()
	if err := apps.Register(reg); err != nil {
		t.Fatal(err)
	}
	mgr, err := session.NewManager(session.ManagerConfig{Registry: reg, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgr.Close(context.Background()) })
	backend := NewLocalBackend("n1", mgr)
	var n1 *Server
	var forwarded atomic.Int32
	mk := func(node string, forward func(context.Context, string, []byte) (bool, error)) (*Server, string) {
		cfg := Config{Node: node, Backend: backend, SessionKey: testKey, Logger: quietLogger(), Keepalive: time.Hour,
			Cluster: &testCluster{forward: forward}}
		askClicks(t, 5*time.Second)(&cfg, reg)
		srv, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(srv.Handler())
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(ctx)
			ts.CloseClientConnections()
			ts.Close()
		})
		return srv, ts.URL
	}
	var url1 string
	n1, url1 = mk("n1", nil)
	_, url2 := mk("n2", func(ctx context.Context, conn string, body []byte) (bool, error) {
		forwarded.Add(1)
		_, err := n1.DeliverResponse(ctx, conn, body)
		return err == nil, err
	})
	target, _ := url.Parse(url2)
	hc := &http.Client{Transport: answersTo{target: target, next: http.DefaultTransport}}
	tr, err := transport.NewStreamableHTTP(url1+"/mcp", transport.WithHTTPBasicClient(hc), transport.WithHTTPLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125),
		client.WithElicitationHandler(answer(mcp.ElicitationResponseActionAccept, true)))
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	callTool(t, c, "swarm_start", map[string]any{"app": "counter", "id": "fw"})
	if r := callTool(t, c, "fw.inc.click", nil); r.IsError {
		t.Fatalf("approved call: %s", text(r))
	}
	if forwarded.Load() != 1 {
		t.Errorf("forwarded %d answers", forwarded.Load())
	}
	if m, _ := mgr.Model("fw"); !strings.Contains(string(m), `"count":1`) {
		t.Errorf("model %s", m)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("the connection did not survive: %v", err)
	}
}

// TestConnRegistryCarriesCapabilitiesAcrossNodes: a connection initialised
// on n1 (with elicitation) calls an Ask tool through n2, which learns the
// capability from the registry and elicits.
func TestConnRegistryCarriesCapabilitiesAcrossNodes(t *testing.T) {
	for _, shared := range []bool{true, false} {
		t.Run(fmt.Sprintf("registry=%v", shared), func(t *testing.T) {
			reg := session.NewRegistry()
			if err := apps.Register(reg); err != nil {
				t.Fatal(err)
			}
			mgr, err := session.NewManager(session.ManagerConfig{Registry: reg, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = mgr.Close(context.Background()) })
			backend := NewLocalBackend("n1", mgr)
			var conns ConnRegistry
			if shared {
				conns = newMemoryConns()
			}
			var envs []*testEnv
			for _, node := range []string{"n1", "n2"} {
				// Without a shared registry each node is a cluster of its own.
				cfg := Config{Node: node, Backend: backend, SessionKey: testKey, Logger: quietLogger(), Keepalive: time.Hour,
					Cluster: &testCluster{conns: conns}}
				askClicks(t, 5*time.Second)(&cfg, reg)
				srv, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				ts := httptest.NewServer(srv.Handler())
				t.Cleanup(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					_ = srv.Shutdown(ctx)
					ts.CloseClientConnections()
					ts.Close()
				})
				envs = append(envs, &testEnv{srv: srv, url: ts.URL, mgr: mgr})
			}
			approve := answer(mcp.ElicitationResponseActionAccept, true)
			a, _ := envs[0].connect(t, clientOpts{elicit: approve})
			callTool(t, a, "swarm_start", map[string]any{"app": "counter", "id": "cr"})
			if shared {
				if ci, ok := conns.Get(a.GetSessionId()); !ok || ci.Node != "n1" || ci.Capabilities.Elicitation == nil {
					t.Fatalf("registry entry %+v %v", ci, ok)
				}
			}
			moved, _ := envs[1].connect(t, clientOpts{sessionID: a.GetSessionId(), elicit: approve})
			r := callTool(t, moved, "cr.inc.click", nil)
			if shared == r.IsError {
				t.Fatalf("isError=%v: %s", r.IsError, text(r))
			}
		})
	}
}
