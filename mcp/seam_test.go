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

	"github.com/mcpswarm/mcpswarm/session"
)

// testCluster is a Cluster for tests: a registry over a ConnRegistry (nil:
// none) with optional overrides, and a relay of optional functions. It
// records the front it was attached to.
type testCluster struct {
	conns      ConnRegistry
	notifyHere func(connID string) bool
	canServe   func(connID string) error
	forward    func(ctx context.Context, connID string, body []byte) (bool, error)

	mu       sync.Mutex
	attached []Front
}

func (c *testCluster) Attach(f Front) (Connections, Relay) {
	c.mu.Lock()
	c.attached = append(c.attached, f)
	c.mu.Unlock()
	var reg Connections
	if c.conns != nil || c.notifyHere != nil || c.canServe != nil {
		reg = testRegistry{c}
	}
	var relay Relay
	if c.forward != nil {
		relay = testRelay{c}
	}
	return reg, relay
}

type testRegistry struct{ c *testCluster }

func (r testRegistry) Put(ci ConnInfo) {
	if r.c.conns != nil {
		r.c.conns.Put(ci)
	}
}

func (r testRegistry) Get(id string) (ConnInfo, bool) {
	if r.c.conns == nil {
		return ConnInfo{}, false
	}
	return r.c.conns.Get(id)
}

func (r testRegistry) Delete(id string) {
	if r.c.conns != nil {
		r.c.conns.Delete(id)
	}
}

func (r testRegistry) Revoked(string) bool { return false }

// The test cluster keeps every revocation (no floor) and mints the
// previous form of ids, as a cluster with a previous-version node would.
func (r testRegistry) RevokedBefore() time.Time { return time.Time{} }
func (r testRegistry) MintSerial() bool         { return false }

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

func (r testRelay) ForwardResponse(ctx context.Context, connID string, body []byte) (bool, error) {
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

// TestAttachGivesTheClusterTheFront: New attaches the front to the cluster
// exactly once, before it serves, in the same step that wires the registry.
func TestAttachGivesTheClusterTheFront(t *testing.T) {
	cl := &testCluster{conns: NewMemoryConns()}
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
	cl := &testCluster{conns: NewMemoryConns(), canServe: func(string) error {
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
