package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/mcpswarm/mcpswarm/bench/internal/rpcwire"
)

// protocolVersion is the revision every series negotiates: the newest
// session-based one all three servers speak, so each keeps per-connection
// state the way a deployed server would.
const protocolVersion = "2025-11-25"

// client is one MCP client over Streamable HTTP, written on net/http alone so
// that every series is driven by exactly the same client code and its cost is
// the same small constant in every series. It is not safe for concurrent use:
// each load worker owns one.
type client struct {
	url     string
	hc      *http.Client
	sid     string // Mcp-Session-Id
	version string // negotiated protocol version
	nextID  int64
}

// newClient returns a client of url with its own keep-alive connection, the
// way separate agents would each hold their own.
func newClient(url string) *client {
	return newClientWith(url, &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true},
	})
}

// newClientWith returns a client of url that sends through hc.
func newClientWith(url string, hc *http.Client) *client {
	return &client{url: url, hc: hc}
}

// initialize opens the MCP connection: initialize, then the initialized
// notification, as every client does.
func (c *client) initialize(ctx context.Context) error {
	res, hdr, err := c.post(ctx, "initialize", map[string]any{
		"protocolVersion": protocolVersion,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "bench-compare", "version": "1"},
	}, true)
	if err != nil {
		return fmt.Errorf("initialize %s: %w", c.url, err)
	}
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(res, &init); err != nil {
		return fmt.Errorf("initialize %s: reading the result: %w", c.url, err)
	}
	c.version = init.ProtocolVersion
	c.sid = hdr.Get("Mcp-Session-Id")
	if c.sid == "" {
		return fmt.Errorf("initialize %s: no Mcp-Session-Id in the answer", c.url)
	}
	if _, _, err := c.post(ctx, "notifications/initialized", nil, false); err != nil {
		return fmt.Errorf("initialized notification to %s: %w", c.url, err)
	}
	return nil
}

// toolResult is the part of a tools/call result the load generator checks.
type toolResult struct {
	IsError bool `json:"isError"`
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
}

// callTool calls a tool and fails on a JSON-RPC error or a tool error, so a
// series that silently fails cannot look fast.
func (c *client) callTool(ctx context.Context, name string, args map[string]any) (toolResult, error) {
	if args == nil {
		args = map[string]any{}
	}
	raw, _, err := c.post(ctx, "tools/call", map[string]any{"name": name, "arguments": args}, true)
	if err != nil {
		return toolResult{}, fmt.Errorf("calling %s: %w", name, err)
	}
	var r toolResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return toolResult{}, fmt.Errorf("calling %s: reading the result: %w", name, err)
	}
	if r.IsError {
		text := ""
		if len(r.Content) > 0 {
			text = r.Content[0].Text
		}
		return r, fmt.Errorf("calling %s: tool error: %s", name, text)
	}
	return r, nil
}

// post sends one JSON-RPC message; for a request (wantResult) it returns the
// matching result, read from a JSON or an SSE answer.
func (c *client) post(ctx context.Context, method string, params any, wantResult bool) (json.RawMessage, http.Header, error) {
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		msg["params"] = params
	}
	c.nextID++
	id := c.nextID
	if wantResult {
		msg["id"] = id
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding %s: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("building the request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
	}
	if c.version != "" {
		req.Header.Set("Mcp-Protocol-Version", c.version)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if !wantResult {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, rpcwire.MaxResponse))
		return nil, resp.Header, nil
	}
	res, err := rpcwire.ReadResult(resp.Header.Get("Content-Type"), io.LimitReader(resp.Body, rpcwire.MaxResponse), id)
	return res, resp.Header, err
}
