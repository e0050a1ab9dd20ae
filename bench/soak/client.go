package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcpswarm/mcpswarm/bench/internal/rpcwire"
)

// protocolVersion is the session-based revision the soak negotiates, so
// every node keeps per-connection state the way deployed clients make it.
const protocolVersion = "2025-11-25"

// conn is one MCP connection over Streamable HTTP whose requests may go to
// any node: the Mcp-Session-Id one node minted is valid on all of them. It
// is not safe for concurrent use; each soak client owns its own.
type conn struct {
	hc      *http.Client
	token   string
	sid     string
	version string
	nextID  int64
	// behind counts the answers "503, Retry-After" this connection
	// retried: a node that may lack a peer's latest writes (its lease on
	// that peer lapsed, docs/ARCHITECTURE.md "Consistency of connection state")
	// refuses for a moment instead of serving stale state. Nil: not counted.
	behind *atomic.Int64
}

// behindWindow bounds how long one request is retried while nodes answer
// that they are behind.
const behindWindow = 30 * time.Second

// do sends the request build makes, again after the Retry-After of each
// "503, Retry-After" answer, within behindWindow; it returns any other
// answer.
func (c *conn) do(ctx context.Context, build func() (*http.Request, error)) (*http.Response, error) {
	deadline := time.Now().Add(behindWindow)
	for {
		req, err := build()
		if err != nil {
			return nil, err
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			return nil, err
		}
		ra := resp.Header.Get("Retry-After")
		if resp.StatusCode != http.StatusServiceUnavailable || ra == "" || time.Now().After(deadline) {
			return resp, nil
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if c.behind != nil {
			c.behind.Add(1)
		}
		wait := time.Second
		if n, err := strconv.Atoi(ra); err == nil && n >= 0 {
			wait = min(time.Duration(n)*time.Second, 5*time.Second)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// httpError is a non-2xx HTTP answer.
type httpError struct {
	Status int
	Body   string
}

func (e *httpError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Body) }

// toolError is a tools/call result with isError set.
type toolError struct{ Text string }

func (e *toolError) Error() string { return "tool error: " + e.Text }

// initialize opens the connection on url: initialize, then initialized.
func (c *conn) initialize(ctx context.Context, url string) error {
	res, hdr, err := c.post(ctx, url, "initialize", map[string]any{
		"protocolVersion": protocolVersion,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "bench-soak", "version": "1"},
	}, true)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(res, &init); err != nil {
		return fmt.Errorf("initialize: reading the result: %w", err)
	}
	c.version = init.ProtocolVersion
	c.sid = hdr.Get("Mcp-Session-Id")
	if c.sid == "" {
		return errors.New("initialize: no Mcp-Session-Id in the answer")
	}
	if _, _, err := c.post(ctx, url, "notifications/initialized", nil, false); err != nil {
		return fmt.Errorf("initialized notification: %w", err)
	}
	return nil
}

// callTool calls a tool through url and returns its structured content;
// a tool error is a *toolError.
func (c *conn) callTool(ctx context.Context, url, name string, args map[string]any) (json.RawMessage, error) {
	if args == nil {
		args = map[string]any{}
	}
	raw, _, err := c.post(ctx, url, "tools/call", map[string]any{"name": name, "arguments": args}, true)
	if err != nil {
		return nil, err
	}
	var r struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		Structured json.RawMessage `json:"structuredContent"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("reading the result: %w", err)
	}
	if r.IsError {
		text := ""
		if len(r.Content) > 0 {
			text = r.Content[0].Text
		}
		return nil, &toolError{Text: text}
	}
	return r.Structured, nil
}

// close ends the connection with DELETE through url.
func (c *conn) close(ctx context.Context, url string) error {
	resp, err := c.do(ctx, func() (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, url, nil)
		if err != nil {
			return nil, fmt.Errorf("building the DELETE: %w", err)
		}
		c.headers(req)
		return req, nil
	})
	if err != nil {
		return fmt.Errorf("DELETE: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, rpcwire.MaxResponse))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("DELETE: %w", &httpError{Status: resp.StatusCode})
	}
	return nil
}

func (c *conn) headers(req *http.Request) {
	req.Header.Set("Authorization", "Bearer "+c.token)
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
	}
	if c.version != "" {
		req.Header.Set("Mcp-Protocol-Version", c.version)
	}
}

// post sends one JSON-RPC message to url; for a request (wantResult) it
// returns the matching result, read from a JSON or an SSE answer.
func (c *conn) post(ctx context.Context, url, method string, params any, wantResult bool) (json.RawMessage, http.Header, error) {
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
	resp, err := c.do(ctx, func() (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("building the request: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		c.headers(req)
		return req, nil
	})
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, nil, &httpError{Status: resp.StatusCode, Body: strings.TrimSpace(string(b))}
	}
	if !wantResult {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, rpcwire.MaxResponse))
		return nil, resp.Header, nil
	}
	res, err := rpcwire.ReadResult(resp.Header.Get("Content-Type"), io.LimitReader(resp.Body, rpcwire.MaxResponse), id)
	return res, resp.Header, err
}
