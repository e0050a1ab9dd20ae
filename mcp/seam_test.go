package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm/mcp/task"
	"github.com/mcpswarm/mcpswarm/mcp/task/tasktest"
	"github.com/mcpswarm/mcpswarm/session"
)

// testCluster is a Cluster for tests, the default of newEnv: a one-node
// cluster's registry over a ConnRegistry (a fresh memoryConns when nil)
// that keeps the revocations of its DELETEs, with optional overrides, and
// a relay that forwards nothing unless forward is set. It records the
// front it was attached to, and a task table in memory (tasktest). Fronts
// given the same testCluster share its records, as the nodes of a cluster
// do.
type testCluster struct {
	conns      ConnRegistry
	notifyHere func(connID string) bool
	canServe   func(connID string) error
	forward    func(ctx context.Context, connID string, body []byte) (bool, error)

	mu       sync.Mutex
	attached []Front
	revoked  map[string]bool
	tasks    *tasktest.Table
}

func (c *testCluster) Attach(f Front) (Connections, Relay, task.Store) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.attached = append(c.attached, f)
	if c.conns == nil {
		c.conns = newMemoryConns()
	}
	if c.tasks == nil {
		c.tasks = tasktest.NewTable()
	}
	return testRegistry{c}, testRelay{c}, c.tasks.Node(f.(*Server).cfg.Node)
}

// memoryConns is a ConnRegistry in memory.
type memoryConns struct {
	mu sync.RWMutex
	m  map[string]ConnInfo
}

func newMemoryConns() *memoryConns { return &memoryConns{m: make(map[string]ConnInfo)} }

func (r *memoryConns) Put(c ConnInfo) {
	r.mu.Lock()
	r.m[c.ID] = c
	r.mu.Unlock()
}

func (r *memoryConns) Get(id string) (ConnInfo, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c, ok := r.m[id]
	return c, ok
}

func (r *memoryConns) Delete(id string) {
	r.mu.Lock()
	delete(r.m, id)
	r.mu.Unlock()
}

type testRegistry struct{ c *testCluster }

func (r testRegistry) Put(ci ConnInfo)                { r.c.conns.Put(ci) }
func (r testRegistry) Get(id string) (ConnInfo, bool) { return r.c.conns.Get(id) }

// Delete forgets connection id's record and revokes it, as a DELETE does
// in the swarm.
func (r testRegistry) Delete(id string) {
	r.c.conns.Delete(id)
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	if r.c.revoked == nil {
		r.c.revoked = map[string]bool{}
	}
	r.c.revoked[id] = true
}

func (r testRegistry) Revoked(id string) bool {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	return r.c.revoked[id]
}

// The test cluster keeps every revocation (no floor) and, like a cluster
// of current nodes, mints serial ids.
func (r testRegistry) RevokedBefore() time.Time { return time.Time{} }
func (r testRegistry) MintSerial() bool         { return true }

// OfPrincipal lists no connection: the test cluster bounds none.
func (r testRegistry) OfPrincipal(string, int) []ConnActivity { return nil }

func (r testRegistry) NotifyHere(id string) bool {
	if r.c.notifyHere == nil {
		return true
	}
	return r.c.notifyHere(id)
}

func (r testRegistry) StreamChanged(string, bool) {}

func (r testRegistry) SpendState(context.Context, string, string, time.Time) bool { return false }

func (r testRegistry) CanServe(id string) error {
	if r.c.canServe == nil {
		return nil
	}
	return r.c.canServe(id)
}

type testRelay struct{ c *testCluster }

// ForwardResponse hands the answer to forward; without it no node takes it.
func (r testRelay) ForwardResponse(ctx context.Context, connID string, body []byte) (bool, error) {
	if r.c.forward == nil {
		return false, nil
	}
	return r.c.forward(ctx, connID, body)
}

func (r testRelay) ForwardCancel(context.Context, string, []byte) {}

func (r testRelay) ForwardSSE(context.Context, string, string, []byte) (int, error) {
	return 0, errors.New("the test relay forwards no SSE")
}

// lagging is a CanServe refusal that asks for a retry after a given time.
type lagging struct{ after time.Duration }

func (l lagging) Error() string             { return fmt.Sprintf("replication from n2 lapsed %s ago", l.after) }
func (l lagging) RetryAfter() time.Duration { return l.after }

// TestNewRefusesAFrontWithoutACluster: a front always joins a cluster (a
// lone node is a one-node cluster), so a Config without one is refused,
// saying so, before anything is built.
func TestNewRefusesAFrontWithoutACluster(t *testing.T) {
	e := newEnv(t, nil)
	_, err := New(Config{Node: "n2", Backend: e.srv.cfg.Backend, SessionKey: testKey, Logger: quietLogger()})
	if err == nil || !strings.Contains(err.Error(), "no cluster") {
		t.Fatalf("New without a cluster: %v, want a refusal naming the missing cluster", err)
	}
}

// TestAttachGivesTheClusterTheFront: New attaches the front to the cluster
// exactly once, before it serves, in the same step that wires the registry.
func TestAttachGivesTheClusterTheFront(t *testing.T) {
	cl := &testCluster{}
	e := newEnv(t, func(c *Config, _ *session.Registry) { c.Cluster = cl })
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if len(cl.attached) != 1 || cl.attached[0] != Front(e.srv) {
		t.Fatalf("attached %d fronts (%v), want this front once", len(cl.attached), cl.attached)
	}
}

// TestCanServeRefusalAnswers503WithRetryAfter: while the registry refuses a
// connection, every request bound to it (POST, GET, DELETE and a legacy
// SSE message) is answered 503 with Retry-After from the error (1 s when it
// names none) and a JSON-RPC error naming the reason; once it allows the
// connection again, the same connection is served, nothing lost.
func TestCanServeRefusalAnswers503WithRetryAfter(t *testing.T) {
	var mu sync.Mutex
	var refusal error
	cl := &testCluster{canServe: func(string) error {
		mu.Lock()
		defer mu.Unlock()
		return refusal
	}}
	e := newEnv(t, func(c *Config, _ *session.Registry) { c.Cluster = cl })
	c, _ := e.connect(t, clientOpts{})
	sid := c.GetSessionId()
	refuse := func(err error) {
		mu.Lock()
		refusal = err
		mu.Unlock()
	}
	ping := `{"jsonrpc":"2.0","id":7,"method":"ping"}`
	for _, tc := range []struct {
		err  error
		want string
	}{
		{lagging{3 * time.Second}, "3"},
		{lagging{1500 * time.Millisecond}, "2"},
		{fmt.Errorf("catching up: %w", lagging{10 * time.Millisecond}), "1"},
		{errors.New("not caught up"), "1"},
	} {
		refuse(tc.err)
		for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
			req, err := http.NewRequest(method, e.url+"/mcp", strings.NewReader(ping))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set(headerSessionID, sid)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("%s while refused (%v): %d %s", method, tc.err, resp.StatusCode, body)
			}
			if got := resp.Header.Get("Retry-After"); got != tc.want {
				t.Errorf("%s: Retry-After %q for %v, want %q", method, got, tc.err, tc.want)
			}
			if _, msg, _ := rpcErrorOf(t, body); !strings.Contains(msg, tc.err.Error()) {
				t.Errorf("%s: error %q does not name the reason %q", method, msg, tc.err)
			}
		}
	}
	// A legacy SSE message bound to a connection is refused the same way.
	sseID := e.srv.SessionIDs().Mint("")
	resp, err := http.Post(e.url+"/message?sessionId="+sseID, "application/json", strings.NewReader(ping))
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("legacy SSE message while refused: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	// A new connection is bound to nothing yet: initialize is served.
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	if code, body := e.rawPost(t, init, nil); code != http.StatusOK {
		t.Fatalf("initialize while refusing is bound to no connection, yet: %d %s", code, body)
	}
	refuse(nil)
	if err := c.Ping(context.Background()); err != nil {
		t.Fatalf("the connection did not survive the refusals: %v", err)
	}
}

func readAll(t testing.TB, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
