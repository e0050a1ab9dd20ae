package mcpswarm_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm"
)

// roundRobin is a load balancer with no stickiness: each HTTP request goes
// to the next node.
type roundRobin struct {
	via   http.RoundTripper // how each host is reached
	hosts []string
	next  atomic.Int64
	mu    sync.Mutex
	seen  map[string]int // host → requests
}

func (rr *roundRobin) RoundTrip(r *http.Request) (*http.Response, error) {
	host := rr.hosts[int(rr.next.Add(1)-1)%len(rr.hosts)]
	rr.mu.Lock()
	rr.seen[host]++
	rr.mu.Unlock()
	r = r.Clone(r.Context())
	r.URL.Host, r.Host = host, host
	return rr.via.RoundTrip(r)
}

type approver struct{ asked atomic.Int32 }

func (a *approver) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	a.asked.Add(1)
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"approve": true},
	}}, nil
}

// One connection, every request to the next node in turn: the whole
// session works, from initialize to DELETE.
func TestRoundRobinConnectionCompletesAFullSession(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	rr := &roundRobin{seen: map[string]int{}, via: httpTransport(nodes[0])}
	for _, n := range nodes {
		rr.hosts = append(rr.hosts, n.HTTPAddr())
	}
	tr, err := transport.NewStreamableHTTP("http://"+rr.hosts[0]+"/mcp",
		transport.WithHTTPBasicClient(&http.Client{Transport: rr}),
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + aliceToken}),
		transport.WithContinuousListening())
	if err != nil {
		t.Fatal(err)
	}
	ap := &approver{}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125), client.WithElicitationHandler(ap))
	var updates, listChanged atomic.Int32
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		switch n.Method {
		case "notifications/resources/updated":
			updates.Add(1)
		case "notifications/tools/list_changed":
			listChanged.Add(1)
		}
	})
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "round-robin", Version: "1"}
	init.Params.Capabilities.Elicitation = &mcp.ElicitationCapability{}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	cc := &conn{Client: c, t: t}

	if res := cc.call("swarm_start", map[string]any{"app": "login", "id": "askrr"}); res.IsError {
		t.Fatalf("swarm_start: %s", textOf(res))
	}
	eventually(t, 5*time.Second, "every node lists askrr's tools for the connection", func() bool {
		for range nodes {
			if !cc.tools()["askrr.username.type_into"] {
				return false
			}
		}
		return true
	})
	sub := mcp.SubscribeRequest{}
	sub.Params.URI = "swarm://session/askrr/model/status"
	if err := c.Subscribe(ctx, sub); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	for _, step := range []struct {
		tool string
		args map[string]any
	}{
		{"askrr.username.type_into", map[string]any{"text": "demo"}},
		{"askrr.password.type_into", map[string]any{"text": "hunter2"}},
		{"askrr.submit.click", nil}, // the policy asks; the client approves
	} {
		if res := cc.call(step.tool, step.args); res.IsError {
			t.Fatalf("%s: %s", step.tool, textOf(res))
		}
	}
	if ap.asked.Load() != 1 {
		t.Fatalf("the client was asked %d times, want once", ap.asked.Load())
	}
	rd := mcp.ReadResourceRequest{}
	rd.Params.URI = "swarm://session/askrr/model/status"
	var status string
	for range nodes { // read it through every node
		res, err := c.ReadResource(ctx, rd)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		status = res.Contents[0].(mcp.TextResourceContents).Text
		if !strings.Contains(status, "Signed in as demo") {
			t.Fatalf("status through a node: %s", status)
		}
	}
	eventually(t, 5*time.Second, "the subscription's update reaches the client", func() bool { return updates.Load() > 0 })
	if listChanged.Load() == 0 {
		t.Fatal("no tools/list_changed reached the client")
	}

	rr.mu.Lock()
	for _, h := range rr.hosts {
		if rr.seen[h] < 3 {
			t.Fatalf("node %s saw only %d requests: the balancer did not spread them", h, rr.seen[h])
		}
	}
	rr.mu.Unlock()

	// DELETE lands on one node; the id is dead on all of them. (mcp-go's
	// client sends its DELETE without the configured headers, so without
	// the bearer token: the node answers 401 and the id lives on. Send the
	// DELETE as a client that authenticates every request does.)
	id := tr.GetSessionId()
	del, _ := http.NewRequest(http.MethodDelete, "http://"+rr.hosts[0]+"/mcp", nil)
	del.Header.Set("Mcp-Session-Id", id)
	del.Header.Set("Mcp-Protocol-Version", mcp.ProtocolVersion20251125)
	del.Header.Set("Authorization", "Bearer "+aliceToken)
	resp, err := (&http.Client{Transport: rr}).Do(del)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE answered %d", resp.StatusCode)
	}
	for _, n := range nodes {
		eventually(t, 5*time.Second, "the ended id is refused on "+n.HTTPAddr(), func() bool {
			return postStatus(t, n, id) == http.StatusNotFound
		})
	}
}

// postStatus posts a ping with session id to node n.
func postStatus(t testing.TB, n *mcpswarm.Node, id string) int {
	req, _ := http.NewRequest(http.MethodPost, "http://"+n.HTTPAddr()+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("Mcp-Protocol-Version", mcp.ProtocolVersion20251125)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	resp, err := httpClient(n).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
