package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/mcp/task"
	"github.com/mcpswarm/mcpswarm/mcp/wire"
)

// The dispatcher: every JSON-RPC message a client sends, on every
// transport and in every era, is decoded once (the transport's
// checkMessage) and served by dispatch. A method is one entry of methods;
// what a method may do to the client (notify it, ask it something) goes
// through the exchange's outbox, which the transport supplies: the POST's
// own stream, the connection's SSE stream, or stdout.

// exchange is one message being served, with everything the transport
// learnt about it. Only the goroutine serving it writes it.
type exchange struct {
	env  wire.Envelope
	body []byte
	// id is the transport's identity of the request (transport,
	// authenticated principal).
	id identity
	// conn is the connection id ("" for a 2026-07-28 request, and on a
	// Streamable HTTP initialize before an id is minted); c is its authz
	// context, built once.
	conn string
	c    authz.Context
	// client is what the connection declared at initialize (from the
	// cluster's registry) or, for a 2026-07-28 request, what its _meta
	// declares.
	client ConnInfo
	// modern marks a 2026-07-28 request; version is its protocol version
	// (the connection's for a session-based one).
	modern  bool
	version string
	// header is the HTTP request's header (nil on stdio).
	header http.Header
	// versions are the protocol versions this transport serves (for
	// server/discover and version errors).
	versions []string
	out      outbox
}

// shared reports whether what the request's connection declares is kept
// for the cluster (an HTTP connection any node may serve), not only by
// its transport (stdio).
func (x *exchange) shared() bool {
	return x.conn != "" && x.c.Transport != authz.TransportStdio
}

// outbox is how a request reaches its client while it runs.
type outbox interface {
	// notify sends a notification (progress, a log message) on the
	// request's own stream.
	notify(n mcp.JSONRPCNotification) error
	// ask sends a server-to-client request (elicitation, sampling, roots)
	// and waits for the client's answer or ctx.
	ask(ctx context.Context, method string, params any) (json.RawMessage, error)
}

// method is one JSON-RPC method the front serves.
type method struct {
	// legacy and modern say in which eras the method exists; a request in
	// the other era is refused with -32601.
	legacy, modern bool
	// read marks the read surface: the read authorizer decides first.
	read  bool
	serve func(s *Server, ctx context.Context, x *exchange) (any, *rpcError)
}

// lookupMethod returns the request method called name.
func lookupMethod(name string) (method, bool) {
	switch mcp.MCPMethod(name) {
	case mcp.MethodInitialize:
		return method{legacy: true, serve: (*Server).serveInitialize}, true
	case mcp.MethodPing:
		return method{legacy: true, serve: servePing}, true
	case mcp.MethodServerDiscover:
		return method{modern: true, serve: (*Server).serveDiscover}, true
	case mcp.MethodSetLogLevel:
		return method{legacy: true, read: true, serve: (*Server).serveSetLevel}, true
	case mcp.MethodToolsList:
		return method{legacy: true, modern: true, read: true, serve: (*Server).serveToolsList}, true
	case mcp.MethodToolsCall:
		return method{legacy: true, modern: true, serve: (*Server).serveToolsCall}, true
	case mcp.MethodResourcesList:
		return method{legacy: true, modern: true, read: true, serve: (*Server).serveResourcesList}, true
	case mcp.MethodResourcesTemplatesList:
		return method{legacy: true, modern: true, read: true, serve: (*Server).serveTemplatesList}, true
	case mcp.MethodResourcesRead:
		return method{legacy: true, modern: true, read: true, serve: (*Server).serveResourcesRead}, true
	case mcp.MethodResourcesSubscribe:
		return method{legacy: true, read: true, serve: (*Server).serveSubscribe}, true
	case mcp.MethodResourcesUnsubscribe:
		return method{legacy: true, read: true, serve: (*Server).serveUnsubscribe}, true
	case mcp.MethodPromptsList:
		return method{legacy: true, modern: true, read: true, serve: (*Server).servePromptsList}, true
	case mcp.MethodPromptsGet:
		return method{legacy: true, modern: true, read: true, serve: (*Server).servePromptsGet}, true
	case mcp.MethodCompletionComplete:
		return method{legacy: true, modern: true, read: true, serve: (*Server).serveComplete}, true
	case mcp.MethodTasksGet, mcp.MethodTasksCancel:
		return method{legacy: true, modern: true, serve: (*Server).serveTasks}, true
	case task.MethodUpdate:
		return method{modern: true, serve: (*Server).serveTasks}, true
	case mcp.MethodTasksResult, mcp.MethodTasksList:
		return method{legacy: true, serve: (*Server).serveTasks}, true
	}
	return method{}, false
}

// dispatch serves x and returns the answer to write, or nil for a
// notification or a client's response; code is the answer's JSON-RPC
// error code, 0 for a result. ctx ends when the client went away.
func (s *Server) dispatch(ctx context.Context, x *exchange) (answer []byte, code int) {
	switch {
	case x.env.IsResponse():
		return nil, 0 // routed by the transport before it gets here
	case !x.env.IsRequest():
		s.serveNotification(ctx, x)
		return nil, 0
	}
	res, e := s.serveRequest(ctx, x)
	if e == nil {
		b, err := appendResult(nil, x.env.ID, res)
		if err == nil {
			return b, 0
		}
		e = &rpcError{Code: codeInternal, Message: "encoding the result: " + err.Error()}
	}
	e.ID = x.env.ID
	return e.marshal(), e.Code
}

// serveRequest runs the one gate every request passes and then its method.
// A handler's panic is the request's error, not the node's end.
func (s *Server) serveRequest(ctx context.Context, x *exchange) (res any, e *rpcError) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("a request's handler panicked", "method", x.env.Method, "panic", p)
			res, e = nil, &rpcError{Code: codeInternal, Message: fmt.Sprintf("panic recovered in %s: %v", x.env.Method, p)}
		}
	}()
	m, ok := lookupMethod(x.env.Method)
	switch {
	case !ok:
		return nil, &rpcError{Code: codeMethodNotFound, Message: fmt.Sprintf("method %q not found", x.env.Method)}
	case x.modern && !m.modern:
		return nil, &rpcError{Code: codeMethodNotFound, Message: fmt.Sprintf("%q was removed in protocol version %s", x.env.Method, mcp.ProtocolVersion20260728)}
	case !x.modern && !m.legacy:
		return nil, &rpcError{Code: codeMethodNotFound, Message: fmt.Sprintf("%q requires protocol version %s or later", x.env.Method, mcp.ProtocolVersion20260728)}
	}
	if m.read {
		if e := s.decideRead(ctx, x.c, x.env.Method, x.env.Params); e != nil {
			return nil, e
		}
	}
	id, _ := wire.DecodeID(x.env.ID)
	ctx, done := s.calls.Start(ctx, x.conn, id)
	defer done()
	ctx = withExchange(ctx, x)
	if res, e = m.serve(s, ctx, x); e != nil {
		return nil, e
	}
	if x.modern {
		res = s.decorate(res, x.env.Method)
	}
	return res, nil
}

// serveNotification takes a client notification: a cancellation cancels
// the call it names; the rest change nothing the front keeps.
func (s *Server) serveNotification(_ context.Context, x *exchange) {
	if x.env.Method == string(mcp.MethodNotificationCancelled) {
		s.calls.Cancel(x.conn, x.env.Params)
	}
}

// decode unmarshals a request's params into v, answering -32602 when they
// do not fit.
func decode(x *exchange, v any) *rpcError {
	if len(x.env.Params) == 0 || string(x.env.Params) == "null" {
		return nil
	}
	if err := json.Unmarshal(x.env.Params, v); err != nil {
		return &rpcError{Code: codeInvalidParams, Message: fmt.Sprintf("invalid params of %s: %v", x.env.Method, err)}
	}
	return nil
}

func servePing(*Server, context.Context, *exchange) (any, *rpcError) {
	return mcp.EmptyResult{}, nil
}

type exchangeKey struct{}

func withExchange(ctx context.Context, x *exchange) context.Context {
	return context.WithValue(ctx, exchangeKey{}, x)
}

// exchangeFrom returns the exchange a handler serves, or nil.
func exchangeFrom(ctx context.Context) *exchange {
	x, _ := ctx.Value(exchangeKey{}).(*exchange)
	return x
}

// requestVersion is the protocol version of the request in ctx.
func requestVersion(ctx context.Context) string {
	if x := exchangeFrom(ctx); x != nil {
		return x.version
	}
	return ""
}

// errResourceNotFound marks a resource nobody serves (to this caller).
var errResourceNotFound = errors.New("resource not found")
