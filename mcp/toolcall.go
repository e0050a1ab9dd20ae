package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// A direct call (directcall.go) used to go through mcp-go's JSON-RPC core,
// HandleMessage, which decodes the whole message four times (its envelope,
// its _meta twice, then the request) and keeps a cancel function per call
// in a map keyed by fmt: 27% of a click's CPU under the 16-client load,
// under half of it in the tool (issue #17's profile). For the tools the
// direct path serves — this front's static tools and the sessions' derived
// tools — none of the core's optional parts is in use: no tool filters,
// input or output validation, task tools, tool middleware but recovery,
// hooks but beforeRequest, tracer or request logger (a front built with
// Config.Extend, which could add middleware or hooks, keeps the core), and
// the request is of a legacy protocol version. So callTool serves such a
// call as the core would, with one decode of the request, and answers the
// same bytes (TestToolCallsPastTheTransportAnswerAsTheTransportDoes);
// anything unusual about the message (a second decode would read it
// differently, a 2026-07-28 _meta, a result member) is left to the core.

// callTool serves the tools/call in rq (checked by canCallDirect) as
// mcp-go's HandleMessage would, ctx being the context HandleMessage would
// get. ok is false when it did not: the core must serve the message.
func (s *Server) callTool(ctx context.Context, rq *request) (resp mcp.JSONRPCMessage, ok bool) {
	if s.cfg.Extend != nil {
		// Extend may have added tool middleware (MCPServer.Use) or hooks
		// (GetHooks) that the core runs on every call: leave its calls to
		// the core.
		return nil, false
	}
	if rq.env.JSONRPC != mcp.JSONRPC_VERSION || len(rq.env.Result) > 0 {
		return nil, false
	}
	id, err := decodeID(rq.env.ID)
	if err != nil || id == nil {
		return nil, false
	}
	var req mcp.CallToolRequest
	if !decodeCallTool(rq.body, &req) && json.Unmarshal(rq.body, &req) != nil {
		return nil, false
	}
	if req.Params.Name != rq.tool {
		return nil, false
	}
	version := req.Params.Meta.ProtocolVersion()
	if mcp.IsModernProtocol(version) {
		return nil, false // 2026-07-28 by its _meta: the core's rules
	}
	if err := s.beforeRequest(ctx, id, json.RawMessage(rq.body)); err != nil {
		return mcp.JSONRPCError{
			JSONRPC: mcp.JSONRPC_VERSION,
			ID:      mcp.NewRequestId(id),
			Error:   mcp.NewJSONRPCErrorDetails(mcp.INVALID_REQUEST, err.Error(), nil),
		}, true
	}
	vs, _ := server.ClientSessionFromContext(ctx).(*viewSession)
	if vs == nil {
		return nil, false
	}
	tool, found := vs.GetSessionTools()[rq.tool]
	if !found || tool.Handler == nil {
		return nil, false
	}
	ctx = server.WithRequestProtocolInfo(ctx, &server.RequestProtocolInfo{ProtocolVersion: version})
	ctx, done := s.calls.start(ctx, rq.checkedSID, id)
	defer done()
	req.Header = make(http.Header) // as the core hands it on without a transport
	result, err := recovered(ctx, tool.Handler, req)
	if err != nil {
		return handlerErrorResponse(id, err), true
	}
	if result == nil {
		return handlerErrorResponse(id, fmt.Errorf("tool '%s' handler returned no result", req.Params.Name)), true
	}
	return mcp.NewJSONRPCResultResponse(mcp.NewRequestId(id), result), true
}

// recovered runs h as mcp-go's WithRecovery middleware does: a panic
// becomes the call's error.
func recovered(ctx context.Context, h ToolHandler, req mcp.CallToolRequest) (result *mcp.CallToolResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			result, err = nil, fmt.Errorf("panic recovered in %s tool handler: %v", req.Params.Name, r)
		}
	}()
	return h(ctx, req)
}

// handlerErrorResponse is the core's answer to a tool handler's error on a
// legacy protocol version.
func handlerErrorResponse(id any, err error) mcp.JSONRPCMessage {
	code, data := mcp.INTERNAL_ERROR, any(nil)
	var required mcp.URLElicitationRequiredError
	var pointer *mcp.URLElicitationRequiredError
	switch {
	case errors.As(err, &required):
		d := required.JSONRPCError().Error
		code, data = d.Code, d.Data
	case errors.As(err, &pointer) && pointer != nil:
		d := pointer.JSONRPCError().Error
		code, data = d.Code, d.Data
	}
	return mcp.JSONRPCError{
		JSONRPC: mcp.JSONRPC_VERSION,
		ID:      mcp.NewRequestId(id),
		Error:   mcp.NewJSONRPCErrorDetails(code, err.Error(), data),
	}
}

// inflightCalls holds the cancel function of each call callTool serves, so
// a client's notifications/cancelled — on this node's front or relayed
// from another node's (DeliverResponse) — cancels it as mcp-go's core
// cancels the calls it serves. A call is known by its connection and its
// request id as fmt prints the id's decoded JSON value (the core's key).
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

// cancel cancels the call a notifications/cancelled of connection conn
// names in params, if callTool is serving it.
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
