package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcpswarm/mcpswarm/internal/poll"
	"github.com/mcpswarm/mcpswarm/session"
)

// clusteredEnv is a front attached to a (test) cluster with a connection
// registry: the configuration under which tool calls may skip mcp-go's
// transport.
func clusteredEnv(t *testing.T, idle time.Duration, muts ...func(*Config, *session.Registry)) *testEnv {
	t.Helper()
	return newEnv(t, func(c *Config, r *session.Registry) {
		c.Cluster = &testCluster{conns: NewMemoryConns()}
		c.IdleTTL = idle
		for _, m := range muts {
			m(c, r)
		}
	})
}

// post sends one JSON-RPC message of connection sid and returns the
// answer's status, media type and body.
func (e *testEnv) post(t *testing.T, sid, body string) (int, string, string) {
	t.Helper()
	return e.rawPostTyped(t, body, map[string]string{headerSessionID: sid, headerProtocolVersion: mcp.ProtocolVersion20251125})
}

// sseMessages returns the JSON-RPC messages of an SSE body in order.
func sseMessages(t *testing.T, body string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(body, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("SSE event %q: %v", data, err)
		}
		out = append(out, m)
	}
	return out
}

func TestToolCallsPastTheTransportAnswerAsTheTransportDoes(t *testing.T) {
	e := clusteredEnv(t, time.Hour)
	c, _ := e.connect(t, clientOpts{})
	sid := c.GetSessionId()
	direct := func() float64 { return testutil.ToFloat64(e.srv.metrics.direct) }

	// The first call of a connection takes mcp-go's transport (it starts
	// the connection's touch window), the next ones do not: they answer
	// the same bytes.
	const list = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"swarm_apps","arguments":{}}}`
	st1, ct1, viaTransport := e.post(t, sid, list)
	if got := direct(); got != 0 {
		t.Fatalf("the connection's first call went past the transport (%v direct calls)", got)
	}
	st2, ct2, viaFront := e.post(t, sid, list)
	if got := direct(); got != 1 {
		t.Fatalf("direct calls after the second call: %v, want 1", got)
	}
	if st1 != st2 || ct1 != ct2 || viaTransport != viaFront {
		t.Fatalf("the answers differ:\ntransport %d %s %s\nfront     %d %s %s", st1, ct1, viaTransport, st2, ct2, viaFront)
	}
	if st2 != http.StatusOK || ct2 != "application/json" || !strings.Contains(viaFront, `"counter"`) {
		t.Fatalf("swarm_apps: %d %s %s", st2, ct2, viaFront)
	}

	// A tool nobody has answers the same either way (a second
	// connection's first call takes the transport).
	other, _ := e.connect(t, clientOpts{})
	const unknown = `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"nosuch.box.click","arguments":{}}}`
	_, _, viaTransport = e.post(t, other.GetSessionId(), unknown)
	_, _, viaFront = e.post(t, sid, unknown)
	if viaTransport != viaFront || !strings.Contains(viaFront, "nosuch") {
		t.Fatalf("unknown tool:\ntransport %s\nfront     %s", viaTransport, viaFront)
	}

	// The connection's log level, set through the transport, holds for the
	// calls past it: a click logs at info, so its answer is an SSE stream
	// with the log message before the result.
	if st, _, body := e.post(t, sid, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"swarm_start","arguments":{"app":"counter","id":"dc"}}}`); st != http.StatusOK || strings.Contains(body, `"isError":true`) {
		t.Fatalf("swarm_start: %d %s", st, body)
	}
	if st, _, body := e.post(t, sid, `{"jsonrpc":"2.0","id":10,"method":"logging/setLevel","params":{"level":"info"}}`); st != http.StatusOK {
		t.Fatalf("logging/setLevel: %d %s", st, body)
	}
	before := direct()
	st, ct, body := e.post(t, sid, `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"dc.inc.click","arguments":{}}}`)
	if direct() != before+1 {
		t.Fatal("the click did not go past the transport")
	}
	if st != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("click with a log message: %d %s %s", st, ct, body)
	}
	// (The start's tools/list_changed may ride on this stream too.)
	msgs := sseMessages(t, body)
	logged := slices.ContainsFunc(msgs, func(m map[string]any) bool { return m["method"] == "notifications/message" })
	last := msgs[len(msgs)-1]
	if !logged || last["id"] != float64(11) || last["result"] == nil {
		t.Fatalf("want the log message, then the result; got %v", msgs)
	}
}

func TestToolCallsPastTheTransportKeepItsIdleClockRunning(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out an idle TTL on the wall clock")
	}
	// mcp-go forgets a connection's node-local state (here: the home
	// node's stand-in) after the idle TTL without a request through its
	// transport. Calls past it must not make a busy connection look idle.
	const ttl = 1500 * time.Millisecond // a stall of over a second would look idle
	e := clusteredEnv(t, ttl)
	c, _ := e.connect(t, clientOpts{})
	sid := c.GetSessionId()
	if r := callTool(t, c, "swarm_start", map[string]any{"app": "counter", "id": "busy"}); r.IsError {
		t.Fatal(text(r))
	}
	if _, ok := e.srv.conns.session(sid).(*homeSession); !ok {
		t.Fatal("no stand-in registered for the connection at home")
	}
	// A client that calls about twenty times per TTL, for three TTLs.
	pace := time.NewTicker(ttl / 20)
	defer pace.Stop()
	for end := time.Now().Add(3 * ttl); time.Now().Before(end); <-pace.C {
		if r := callTool(t, c, "busy.inc.click", nil); r.IsError {
			t.Fatal(text(r))
		}
		if _, ok := e.srv.conns.session(sid).(*homeSession); !ok {
			t.Fatal("mcp-go forgot a connection that calls every few milliseconds")
		}
	}
	if testutil.ToFloat64(e.srv.metrics.direct) == 0 {
		t.Fatal("no call went past the transport")
	}
	// Idle, it is forgotten as before (mcp-go sweeps every second at most).
	poll.True(t, ttl+5*time.Second, "an idle connection's state goes after the idle TTL", func() bool {
		return e.srv.conns.session(sid) == nil
	})
}

func TestTouchClock(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := newTouchClock(time.Minute)
	if c.fresh("a", t0) {
		t.Fatal("fresh before any mark")
	}
	c.mark("a", t0)
	if !c.fresh("a", t0.Add(59*time.Second)) {
		t.Fatal("not fresh inside the window")
	}
	if c.fresh("a", t0.Add(time.Minute)) {
		t.Fatal("fresh at the window's end")
	}
	c.forget("a")
	if c.fresh("a", t0) || c.size() != 0 {
		t.Fatal("remembered after forget")
	}

	// Connections that stopped calling are pruned as the clock grows.
	for i := range minTouchPrune - 1 {
		c.mark(string(rune('A'+i%26))+strings.Repeat("x", i/26), t0)
	}
	c.mark("late", t0.Add(2*time.Minute))
	if c.size() != 1 || !c.fresh("late", t0.Add(2*time.Minute)) {
		t.Fatalf("after pruning: %d remembered", c.size())
	}
}

func TestToolCallsPastTheTransportAskForApprovalOnTheirOwnStream(t *testing.T) {
	e := clusteredEnv(t, time.Hour, askClicks(t, 2*time.Second))
	direct := func() float64 { return testutil.ToFloat64(e.srv.metrics.direct) }
	for _, tc := range []struct {
		name    string
		id      string
		answer  elicitFunc
		runs    bool
		outcome string
	}{
		{"approved", "aok", answer(mcp.ElicitationResponseActionAccept, true), true, ""},
		{"declined", "ano", answer(mcp.ElicitationResponseActionDecline, false), false, "declined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := e.connect(t, clientOpts{elicit: tc.answer})
			id := tc.id
			if r := callTool(t, c, "swarm_start", map[string]any{"app": "counter", "id": id}); r.IsError {
				t.Fatal(text(r))
			}
			before := direct()
			r := callTool(t, c, id+".inc.click", nil)
			if direct() != before+1 {
				t.Fatal("the click did not go past the transport")
			}
			ran := strings.Contains(count(t, e, id), `"count":1`)
			if ran != tc.runs || r.IsError == tc.runs || (tc.outcome != "" && !strings.Contains(text(r), tc.outcome)) {
				t.Fatalf("ran %v, answer %v %q; want ran %v, outcome %q", ran, r.IsError, text(r), tc.runs, tc.outcome)
			}
		})
	}
}

func TestDirectSessionHasWhatTheTransportsSessionHas(t *testing.T) {
	// The transport's per-request session, as a tool handler sees it (a
	// tool added through Extend always takes the transport).
	var transportSession server.ClientSession
	e := clusteredEnv(t, time.Hour, func(c *Config, _ *session.Registry) {
		c.Extend = func(m *server.MCPServer) {
			m.AddTool(mcp.NewTool("probe.with.dots"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				if vs, ok := server.ClientSessionFromContext(ctx).(*viewSession); ok {
					transportSession = vs.ClientSession
				}
				return mcp.NewToolResultText("ok"), nil
			})
		}
	})
	c, _ := e.connect(t, clientOpts{})
	for range 2 {
		if r := callTool(t, c, "probe.with.dots", nil); r.IsError {
			t.Fatal(text(r))
		}
	}
	if testutil.ToFloat64(e.srv.metrics.direct) != 0 {
		t.Fatal("a tool added through Extend went past the transport")
	}
	if transportSession == nil {
		t.Fatal("the probe saw no per-request session")
	}
	// What the direct session leaves out, and why: the view session
	// answers tools itself, never forwards the SSE upgrade on a POST, and
	// installs resources only for resource methods; subscriptions and a
	// negotiated version belong to 2026-07-28 requests and GET streams.
	omitted := map[string]bool{
		"SessionWithTools": true, "SessionWithStreamableHTTPConfig": true,
		"SessionWithResources": true, "SessionWithResourceTemplates": true,
		"SessionWithResourceSubscriptions": true, "SessionWithResourceSubscriptionsErr": true,
		"SessionWithSubscriptionFilter": true, "SessionWithProtocolVersion": true,
	}
	for _, iface := range []reflect.Type{
		reflect.TypeFor[server.SessionWithLogging](), reflect.TypeFor[server.SessionWithTools](),
		reflect.TypeFor[server.SessionWithResources](), reflect.TypeFor[server.SessionWithResourceTemplates](),
		reflect.TypeFor[server.SessionWithResourceSubscriptions](), reflect.TypeFor[server.SessionWithResourceSubscriptionsErr](),
		reflect.TypeFor[server.SessionWithClientInfo](), reflect.TypeFor[server.SessionWithElicitation](),
		reflect.TypeFor[server.SessionWithSampling](), reflect.TypeFor[server.SessionWithRoots](),
		reflect.TypeFor[server.SessionWithStreamableHTTPConfig](), reflect.TypeFor[server.SessionWithSubscriptionFilter](),
		reflect.TypeFor[server.SessionWithProtocolVersion](),
	} {
		has := reflect.TypeOf(transportSession).Implements(iface)
		ours := reflect.TypeFor[*directSession]().Implements(iface)
		if has && !ours && !omitted[iface.Name()] {
			t.Errorf("mcp-go's per-request session is a %s, the direct session is not", iface.Name())
		}
	}
}
