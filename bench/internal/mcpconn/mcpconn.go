// Package mcpconn is the bench programs' minimal MCP client: one
// connection over Streamable HTTP (2025-11-25) with a bearer token, which
// initializes and calls tools.
package mcpconn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/bench/internal/procwait"
	"github.com/mcpswarm/mcpswarm/bench/internal/rpcwire"
)

// Conn is one MCP connection. It is not safe for concurrent use.
type Conn struct {
	hc     *http.Client
	url    string
	token  string
	sid    string
	nextID int64
	// tool, for a 2026-07-28 call (see CallStateless), names the tool in
	// the request's headers; "" for a 2025-11-25 connection.
	tool string
}

// Dial initializes a connection to the MCP endpoint url (…/mcp) as the
// principal of token, naming the client clientName.
func Dial(ctx context.Context, hc *http.Client, url, token, clientName string) (*Conn, error) {
	c := &Conn{hc: hc, url: url, token: token}
	_, hdr, err := c.post(ctx, "initialize", map[string]any{
		"protocolVersion": "2025-11-25",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": clientName, "version": "1"},
	}, true)
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if c.sid = hdr.Get("Mcp-Session-Id"); c.sid == "" {
		return nil, errors.New("initialize: no Mcp-Session-Id in the answer")
	}
	if _, _, err := c.post(ctx, "notifications/initialized", nil, false); err != nil {
		return nil, fmt.Errorf("initialized notification: %w", err)
	}
	return c, nil
}

// CallTool calls a tool and fails on a tool error.
func (c *Conn) CallTool(ctx context.Context, name string, args map[string]any) error {
	raw, _, err := c.post(ctx, "tools/call", map[string]any{"name": name, "arguments": args}, true)
	if err != nil {
		return err
	}
	var r struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("reading the result: %w", err)
	}
	if r.IsError {
		text := ""
		if len(r.Content) > 0 {
			text = r.Content[0].Text
		}
		return fmt.Errorf("tool error: %s", text)
	}
	return nil
}

// CallStateless makes a 2026-07-28 tools/call of tool, which needs no
// connection: protocol version, client info and capabilities (elicitation)
// ride in the request's _meta. With a state it answers an input_required
// round with responses. It returns the result as it came.
func CallStateless(ctx context.Context, hc *http.Client, url, token, clientName, tool, state string, responses map[string]any) (map[string]any, error) {
	c := &Conn{hc: hc, url: url, token: token, tool: tool}
	params := map[string]any{"name": tool, "arguments": map[string]any{}, "_meta": map[string]any{
		mcp.MetaKeyProtocolVersion:    mcp.ProtocolVersion20260728,
		mcp.MetaKeyClientInfo:         map[string]any{"name": clientName, "version": "1"},
		mcp.MetaKeyClientCapabilities: map[string]any{"elicitation": map[string]any{}},
	}}
	if state != "" {
		params["requestState"], params["inputResponses"] = state, responses
	}
	raw, _, err := c.post(ctx, "tools/call", params, true)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("reading the result: %w", err)
	}
	return out, nil
}

// post sends one JSON-RPC message; for a request it returns the result.
func (c *Conn) post(ctx context.Context, method string, params any, wantResult bool) (json.RawMessage, http.Header, error) {
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		msg["params"] = params
	}
	c.nextID++
	if wantResult {
		msg["id"] = c.nextID
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding %s: %w", method, err)
	}
	resp, err := c.send(ctx, body)
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
	res, err := rpcwire.ReadResult(resp.Header.Get("Content-Type"), io.LimitReader(resp.Body, rpcwire.MaxResponse), c.nextID)
	return res, resp.Header, err
}

// send posts body, again after each "503, Retry-After" answer (a node that
// is catching up after a membership change refuses for a moment) for up
// to 30 s.
func (c *Conn) send(ctx context.Context, body []byte) (*http.Response, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("building the request: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+c.token)
		if c.sid != "" {
			req.Header.Set("Mcp-Session-Id", c.sid)
			req.Header.Set(mcp.HeaderProtocolVersion, "2025-11-25")
		}
		if c.tool != "" {
			req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
			req.Header.Set(mcp.HeaderMethod, "tools/call")
			req.Header.Set(mcp.HeaderName, c.tool)
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || time.Now().After(deadline) {
			return resp, nil
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if err := procwait.Sleep(ctx, 500*time.Millisecond); err != nil {
			return nil, err
		}
	}
}
