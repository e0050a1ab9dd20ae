package mcp

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/internal/memnet"
	"github.com/mcpswarm/mcpswarm/session"
)

// A POST answered as an SSE stream ends with its answer in the same write
// as the body's end: a client that stops reading at its answer and closes
// the body (as mcp-go's does) still finds the body ended, and the
// connection is reused. Flushing the answer alone made every such call
// open a new connection.
func TestAnSSEAnswerLeavesTheConnectionReusable(t *testing.T) {
	e := newEnv(t, func(c *Config, _ *session.Registry) {
		c.Extend = func(x *Extension) {
			x.AddTool(mcp.NewTool("chatty"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				client, _ := ClientFrom(ctx)
				if err := client.Notify("notifications/message", map[string]any{"level": "info", "data": "working"}); err != nil {
					return nil, err
				}
				return mcp.NewToolResultText("done"), nil
			})
		}
	})
	c, _ := e.connect(t, clientOpts{})
	sid := c.GetSessionId()
	// Synchronous pipes, as between processes under load: the answer and
	// the body's end arrive together only if they were written together.
	nw := memnet.New("n1")
	ln, err := nw.Node("n1").ListenHTTP()
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: e.srv.Handler()}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	hc := &http.Client{Transport: nw.HTTPTransport()}
	t.Cleanup(hc.CloseIdleConnections)
	reused := 0
	for i := range 5 {
		req, err := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/mcp",
			strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"chatty","arguments":{}}}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(headerSessionID, sid)
		req.Header.Set(headerProtocolVersion, mcp.ProtocolVersion20251125)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) {
				if info.Reused {
					reused++
				}
			},
		}))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("call %d answered %q; want an SSE stream (the tool notified first)", i, ct)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() && !strings.Contains(sc.Text(), `"id":7`) {
		}
		resp.Body.Close() // at the answer, as mcp-go's client does
	}
	if reused < 4 {
		t.Errorf("%d of 4 later calls reused the connection; an SSE answer must leave it reusable", reused)
	}
}

// A legacy SSE connection answers each POST at once and runs its call on:
// past maxSSECalls in flight, a POST is refused with 429 instead of
// starting one more, and once a call ends the connection takes calls
// again; the calls end with the stream.
func TestALegacySSEConnectionBoundsItsCallsInFlight(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, maxSSECalls+1)
	e := newEnv(t, func(c *Config, _ *session.Registry) {
		c.Extend = func(x *Extension) {
			x.AddTool(mcp.NewTool("slow"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				started <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
				}
				return mcp.NewToolResultText("done"), nil
			})
		}
	})
	c := openSSE(t, e.url)
	c.call(t, e.url, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	slow := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow","arguments":{}}}`
	for i := range maxSSECalls {
		if status, body := postTo(t, e.url+c.endpoint, slow); status != http.StatusAccepted {
			t.Fatalf("call %d: %d %s", i, status, body)
		}
	}
	for range maxSSECalls {
		receive(t, started, 10*time.Second, "a slow call starting")
	}
	if status, body := postTo(t, e.url+c.endpoint, slow); status != http.StatusTooManyRequests {
		t.Fatalf("call %d answered %d %s; want 429", maxSSECalls+1, status, body)
	}
	release <- struct{}{}
	receive(t, c.events, 10*time.Second, "the released call's answer")
	if status, body := postTo(t, e.url+c.endpoint, slow); status != http.StatusAccepted {
		t.Fatalf("a call after one ended: %d %s", status, body)
	}
	// The rest end with the stream, when the test closes it.
}

// cannedModel answers every sampling request with one text.
type cannedModel struct{ text string }

func (m cannedModel) CreateMessage(context.Context, mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	return &mcp.CreateMessageResult{SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent(m.text)},
		Model: "canned", StopReason: "endTurn"}, nil
}

// A handler that samples through ClientFrom gets the client's answer with
// its content typed (mcp.TextContent), as mcp-go's server handed it on, not
// the generic map JSON decodes it to; the request goes out on the call's
// own stream and the answer comes back by its relay id.
func TestAHandlerSamplesTheCallingClient(t *testing.T) {
	e := newEnv(t, func(c *Config, _ *session.Registry) {
		c.Extend = func(x *Extension) {
			x.AddTool(mcp.NewTool("ask_model"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				client, _ := ClientFrom(ctx)
				res, err := client.Sample(ctx, mcp.CreateMessageParams{MaxTokens: 10,
					Messages: []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent("capital of France?")}}})
				if err != nil {
					return nil, err
				}
				text, ok := res.Content.(mcp.TextContent)
				if !ok {
					return mcp.NewToolResultError(fmt.Sprintf("content of type %T", res.Content)), nil
				}
				return mcp.NewToolResultText(text.Text), nil
			})
		}
	})
	c, _ := e.connect(t, clientOpts{sample: cannedModel{"Paris"}})
	if r := callTool(t, c, "ask_model", nil); r.IsError || text(r) != "Paris" {
		t.Fatalf("the tool answered %q (error %v); want the model's typed text", text(r), r.IsError)
	}
}
