package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"go.uber.org/goleak"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/session"
	"github.com/mcpswarm/mcpswarm/session/apps"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// Idle keep-alive connections of http.DefaultTransport outlive tests.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	)
}

var testKey = []byte("0123456789abcdef0123456789abcdef")

// testEnv is one node's MCP front over loopback HTTP.
type testEnv struct {
	srv *Server
	ts  *httptest.Server
	mgr *session.Manager
	url string
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newEnv starts a front with the dev guard (allow all) unless mut changes it.
func newEnv(t testing.TB, mut func(*Config, *session.Registry)) *testEnv {
	t.Helper()
	reg := session.NewRegistry()
	if err := apps.Register(reg); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Node: "n1", Guard: authz.DevGuard(), SessionKey: testKey, Logger: quietLogger(), Keepalive: time.Hour,
		Cluster: &testCluster{}}
	if mut != nil {
		mut(&cfg, reg)
	}
	mgr, err := session.NewManager(session.ManagerConfig{Registry: reg, Startable: reg.Names(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Backend == nil {
		cfg.Backend = NewLocalBackend("n1", mgr)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		ts.CloseClientConnections()
		ts.Close()
		_ = mgr.Close(ctx)
		http.DefaultClient.CloseIdleConnections()
	})
	return &testEnv{srv: srv, ts: ts, mgr: mgr, url: ts.URL}
}

// notes collects a client's notifications.
type notes struct {
	mu   sync.Mutex
	list []mcp.JSONRPCNotification
	ch   chan struct{}
}

func newNotes() *notes { return &notes{ch: make(chan struct{}, 1)} }

func (n *notes) add(x mcp.JSONRPCNotification) {
	n.mu.Lock()
	n.list = append(n.list, x)
	n.mu.Unlock()
	select {
	case n.ch <- struct{}{}:
	default:
	}
}

func (n *notes) count(method string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, x := range n.list {
		if x.Method == method {
			c++
		}
	}
	return c
}

func (n *notes) all(method string) []mcp.JSONRPCNotification {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []mcp.JSONRPCNotification
	for _, x := range n.list {
		if x.Method == method {
			out = append(out, x)
		}
	}
	return out
}

// waitFor waits until method has been seen at least want times.
func (n *notes) waitFor(t testing.TB, method string, want int) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for n.count(method) < want {
		select {
		case <-n.ch:
		case <-deadline:
			t.Fatalf("saw %d %s notifications, want %d", n.count(method), method, want)
		}
	}
}

type clientOpts struct {
	headers   map[string]string
	elicit    client.ElicitationHandler
	sample    client.SamplingHandler
	listen    bool
	modern    bool
	sessionID string
}

// connect opens an mcp-go client over Streamable HTTP, pinned to 2025-11-25
// unless o.modern.
func (e *testEnv) connect(t testing.TB, o clientOpts) (*client.Client, *notes) {
	t.Helper()
	topts := []transport.StreamableHTTPCOption{transport.WithHTTPLogger(quietLogger())}
	if o.headers != nil {
		topts = append(topts, transport.WithHTTPHeaders(o.headers))
	}
	if o.listen {
		topts = append(topts, transport.WithContinuousListening())
	}
	if o.sessionID != "" {
		topts = append(topts, transport.WithSession(o.sessionID))
	}
	tr, err := transport.NewStreamableHTTP(e.url+"/mcp", topts...)
	if err != nil {
		t.Fatal(err)
	}
	var copts []client.ClientOption
	if !o.modern {
		copts = append(copts, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	}
	if o.elicit != nil {
		copts = append(copts, client.WithElicitationHandler(o.elicit))
	}
	if o.sample != nil {
		copts = append(copts, client.WithSamplingHandler(o.sample))
	}
	if o.sessionID != "" {
		copts = append(copts, client.WithSession())
	}
	c := client.NewClient(tr, copts...)
	n := newNotes()
	c.OnNotification(n.add)
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if o.sessionID == "" {
		req := mcp.InitializeRequest{}
		req.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
		if _, err := c.Initialize(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	return c, n
}

func callTool(t testing.TB, c *client.Client, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		t.Fatalf("calling %s: %v", name, err)
	}
	return res
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func toolNames(t testing.TB, c *client.Client) map[string]bool {
	t.Helper()
	res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("listing tools: %v", err)
	}
	out := map[string]bool{}
	for _, x := range res.Tools {
		out[x.Name] = true
	}
	return out
}

// rawPost posts body to /mcp with headers and returns status and body.
func (e *testEnv) rawPost(t testing.TB, body string, headers map[string]string) (int, string) {
	t.Helper()
	status, _, b := e.rawPostTyped(t, body, headers)
	return status, b
}

// rawPostTyped is rawPost that also returns the answer's Content-Type.
func (e *testEnv) rawPostTyped(t testing.TB, body string, headers map[string]string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// rpcErrorOf decodes a JSON-RPC error from a JSON or SSE body.
func rpcErrorOf(t testing.TB, body string) (code int, msg string, data map[string]any) {
	t.Helper()
	if i := strings.Index(body, "data: "); i >= 0 && strings.HasPrefix(strings.TrimSpace(body), "event:") {
		body = strings.TrimSpace(strings.SplitN(body[i+6:], "\n", 2)[0])
	}
	var v struct {
		Error *struct {
			Code    int            `json:"code"`
			Message string         `json:"message"`
			Data    map[string]any `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil || v.Error == nil {
		t.Fatalf("not a json-rpc error: %q", body)
	}
	return v.Error.Code, v.Error.Message, v.Error.Data
}

// tokenPolicy is a policy with static tokens for alice and bob (bob admin)
// that allows everything; tools and reads may be replaced in the Guard.
func tokenGuard(t testing.TB) authz.Guard {
	t.Helper()
	h := func(s string) string { sum := sha256.Sum256([]byte(s)); return hex.EncodeToString(sum[:]) }
	yaml := fmt.Sprintf(`name: test
tokens:
  - sha256: %q
    subject: alice
  - sha256: %q
    subject: carol
tools:
  - allow: true
reads:
  - allow: true
`, h("alice-token"), h("carol-token"))
	p, err := authz.ParsePolicy("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	g, err := p.Guard()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

func postTo(t testing.TB, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// newFuzzTarget builds a front for the fuzz target, shared by its
// iterations and shut down when fuzzing ends.
func newFuzzTarget(f *testing.F) *fuzzTarget {
	e := newEnv(f, func(c *Config, _ *session.Registry) { c.Node = "fz" })
	return &fuzzTarget{h: e.srv.Handler()}
}
