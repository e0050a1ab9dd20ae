package mcpswarm_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// postsElsewhere sends every POST to another node, as a load balancer
// without stickiness may, and leaves the SSE GET where it is.
type postsElsewhere struct {
	via   http.RoundTripper // how the nodes are reached
	to    string
	moved atomic.Int32
}

func (p *postsElsewhere) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost {
		r = r.Clone(r.Context())
		r.URL.Host, r.Host = p.to, p.to
		p.moved.Add(1)
	}
	return p.via.RoundTrip(r)
}

// A legacy SSE client whose stream is on node1 and whose POSTs all land on
// node2 works as if it were talking to one node.
func TestLegacySSEPostsAreForwardedToTheStreamsNode(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(2)
	lb := &postsElsewhere{to: nodes[1].HTTPAddr(), via: httpTransport(nodes[0])}
	tr, err := transport.NewSSE("http://"+nodes[0].HTTPAddr()+"/sse",
		transport.WithHTTPClient(&http.Client{Transport: lb}),
		transport.WithHeaders(map[string]string{"Authorization": "Bearer " + aliceToken}))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20250618
	init.Params.ClientInfo = mcp.Implementation{Name: "sse", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize with POSTs on node2: %v", err)
	}
	cc := &conn{Client: c, t: t}
	if res := cc.call("swarm_start", map[string]any{"app": "counter", "id": "ss"}); res.IsError {
		t.Fatal(textOf(res))
	}
	if !cc.tools()["ss.inc.click"] {
		t.Fatal("the SSE connection does not list its new session's tools")
	}
	if res := cc.call("ss.inc.click", nil); res.IsError {
		t.Fatal(textOf(res))
	}
	if m := textOf(cc.call("swarm_get_model", map[string]any{"id": "ss"})); !strings.Contains(m, `"count":1`) {
		t.Fatalf("model after one click: %s", m)
	}
	if lb.moved.Load() < 5 {
		t.Fatalf("only %d POSTs went to node2", lb.moved.Load())
	}
}
