package mcpswarm_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/mcp/fixture"
)

// llm answers sampling and elicitation requests and counts them.
type llm struct{ sampled, elicited atomic.Int32 }

func (l *llm) CreateMessage(_ context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	l.sampled.Add(1)
	return &mcp.CreateMessageResult{SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("pong")}, Model: "test"}, nil
}

func (l *llm) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	l.elicited.Add(1)
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"username": "u", "email": "u@example.com"},
	}}, nil
}

// relayClient connects to base through rt (nil: straight) with sampling and
// elicitation support, listening on a GET stream.
func relayClient(t *testing.T, base string, rt http.RoundTripper, l *llm) *client.Client {
	t.Helper()
	opts := []transport.StreamableHTTPCOption{
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + aliceToken}),
		transport.WithContinuousListening(),
	}
	if rt != nil {
		opts = append(opts, transport.WithHTTPBasicClient(&http.Client{Transport: rt}))
	}
	tr, err := transport.NewStreamableHTTP("http://"+base+"/mcp", opts...)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125),
		client.WithSamplingHandler(l), client.WithElicitationHandler(l))
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "relay", Version: "1"}
	init.Params.Capabilities.Sampling = &mcp.SamplingCapability{}
	init.Params.Capabilities.Elicitation = &mcp.ElicitationCapability{}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return c
}

func callText(t *testing.T, c *client.Client, tool string, args map[string]any) string {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = tool, args
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var b strings.Builder
	for _, x := range res.Content {
		if tc, ok := x.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	if res.IsError {
		t.Fatalf("%s answered an error: %s", tool, b.String())
	}
	return b.String()
}

// A node's own sampling and elicitation requests are answered whichever
// node the client's answer reaches: straight to one node of a cluster (the
// answer comes back to the node that asked) and through a balancer with no
// stickiness (it lands on another node and is relayed).
func TestServerRequestsAnsweredOnAnyNode(t *testing.T) {
	e := newSwarmEnv(t)
	e.conformance = true
	nodes := e.cluster(3)
	rr := &roundRobin{seen: map[string]int{}, via: httpTransport(nodes[0])}
	for _, n := range nodes {
		rr.hosts = append(rr.hosts, n.HTTPAddr())
	}
	for _, via := range []struct {
		name string
		rt   http.RoundTripper
	}{{"straight to node1", httpTransport(nodes[0])}, {"round robin", rr}} {
		t.Run(via.name, func(t *testing.T) {
			l := &llm{}
			c := relayClient(t, nodes[0].HTTPAddr(), via.rt, l)
			const rounds = 4
			for i := range rounds {
				got := callText(t, c, fixture.ToolSampling, map[string]any{"prompt": fmt.Sprint("ping ", i)})
				if !strings.Contains(got, "LLM response: pong") {
					t.Fatalf("sampling round %d answered %q", i, got)
				}
				got = callText(t, c, fixture.ToolElicitation, map[string]any{"message": "who?"})
				if !strings.Contains(got, "action=accept") {
					t.Fatalf("elicitation round %d answered %q", i, got)
				}
			}
			if l.sampled.Load() != rounds || l.elicited.Load() != rounds {
				t.Fatalf("client sampled %d and elicited %d times, want %d each", l.sampled.Load(), l.elicited.Load(), rounds)
			}
		})
	}
}
