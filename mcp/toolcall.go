package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// recovered runs h: a panic becomes the call's error.
func recovered(ctx context.Context, h ToolHandler, req mcp.CallToolRequest) (result *mcp.CallToolResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			result, err = nil, fmt.Errorf("panic recovered in %s tool handler: %v", req.Params.Name, r)
		}
	}()
	return h(ctx, req)
}

// inflightCalls holds the cancel function of each request in flight, so a
// client's notifications/cancelled — on this node's front or relayed from
// another node's (DeliverResponse) — cancels it. A request is known by its
// connection and its id as fmt prints the id's decoded JSON value.
type inflightCalls struct {
	mu sync.Mutex
	m  map[inflightKey]context.CancelFunc
}

type inflightKey struct{ conn, id string }

// requestIDKey prints a decoded JSON-RPC id as fmt's %v does, without fmt
// for the two kinds an id has.
func requestIDKey(id any) string {
	switch v := id.(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	default:
		return fmt.Sprint(v)
	}
}

// start returns ctx with a cancel function registered for conn's request
// id, and done, which unregisters it.
func (c *inflightCalls) start(ctx context.Context, conn string, id any) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	key := inflightKey{conn, requestIDKey(id)}
	c.mu.Lock()
	if c.m == nil {
		c.m = make(map[inflightKey]context.CancelFunc)
	}
	c.m[key] = cancel
	c.mu.Unlock()
	return ctx, func() {
		c.mu.Lock()
		delete(c.m, key)
		c.mu.Unlock()
		cancel()
	}
}

// cancel cancels the request a notifications/cancelled of connection conn
// names in params, if it runs here.
func (c *inflightCalls) cancel(conn string, params json.RawMessage) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil || p.RequestID == nil {
		return
	}
	key := inflightKey{conn, requestIDKey(p.RequestID)}
	c.mu.Lock()
	f, ok := c.m[key]
	delete(c.m, key)
	c.mu.Unlock()
	if ok {
		f()
	}
}
