package main

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/mcp/fixture"
)

// progressBeforeResult calls the progress tool calls times over one session
// that also holds the standalone GET stream (as the TypeScript SDK does) and
// returns how many calls saw all their progress notifications before their
// result.
func progressBeforeResult(t *testing.T, o options, calls int) int {
	t.Helper()
	ts := httptest.NewServer(newHandler(o))
	t.Cleanup(ts.Close)
	tr, err := transport.NewStreamableHTTP(ts.URL, transport.WithContinuousListening(),
		transport.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatalf("creating the transport: %v", err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	var mu sync.Mutex
	seen := map[any]int{}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationProgress) {
			mu.Lock()
			seen[n.Params.AdditionalFields["progressToken"]]++
			mu.Unlock()
		}
	})
	ctx := t.Context()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("starting the client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: mcp.ProtocolVersion20251125, ClientInfo: mcp.Implementation{Name: "t", Version: "0"}}}); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	complete := 0
	for i := range calls {
		token := float64(i + 1)
		req := mcp.CallToolRequest{}
		req.Params.Name = fixture.ToolProgress
		req.Params.Meta = &mcp.Meta{ProgressToken: token}
		if _, err := c.CallTool(context.WithoutCancel(ctx), req); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		mu.Lock()
		if seen[token] == len(fixture.ProgressSteps()) {
			complete++
		}
		mu.Unlock()
	}
	return complete
}

// TestRequestStreamsDeliverProgressBeforeTheResult repeats the race the
// conformance suite hits: with request streams every call's progress
// notifications arrive before its result, although the GET stream is open.
func TestRequestStreamsDeliverProgressBeforeTheResult(t *testing.T) {
	const calls = 40
	if got := progressBeforeResult(t, options{nopEventStore: true, requestStreams: true}, calls); got != calls {
		t.Errorf("%d of %d calls saw all their progress before the result", got, calls)
	}
}
