package mcp

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mcpswarm/mcpswarm/mcp/apps"
	"github.com/mcpswarm/mcpswarm/mcp/task"
	"github.com/mcpswarm/mcpswarm/mcp/wire"
)

// What each request method does, once dispatch let it through.

// capabilities are what this front offers in protocol version: tasks as
// the capability of 2025-11-25 or the extension of 2026-07-28.
func (s *Server) capabilities(version string) mcp.ServerCapabilities {
	c := mcp.ServerCapabilities{
		Logging:     &struct{}{},
		Completions: &struct{}{},
		Elicitation: &mcp.ElicitationCapability{},
		Extensions:  apps.Extensions(),
	}
	switch {
	case s.tasks != nil && mcp.IsModernProtocol(version):
		c.Extensions[task.ExtensionName] = map[string]any{}
	case s.tasks != nil && version == mcp.ProtocolVersion20251125:
		c.Tasks = task.LegacyCapability()
	}
	c.Tools = &struct {
		ListChanged bool `json:"listChanged,omitempty"`
	}{ListChanged: true}
	c.Resources = &struct {
		Subscribe   bool `json:"subscribe,omitempty"`
		ListChanged bool `json:"listChanged,omitempty"`
	}{Subscribe: true, ListChanged: true}
	c.Prompts = &struct {
		ListChanged bool `json:"listChanged,omitempty"`
	}{}
	return c
}

func (s *Server) implementation() mcp.Implementation {
	return mcp.Implementation{Name: "mcpswarm", Version: s.cfg.Version}
}

func (s *Server) serveInitialize(ctx context.Context, x *exchange) (any, *rpcError) {
	var p mcp.InitializeParams
	if e := decode(x, &p); e != nil {
		return nil, e
	}
	res := mcp.InitializeResult{
		ProtocolVersion: mcp.NegotiateLegacyVersion(p.ProtocolVersion),
		ServerInfo:      s.implementation(),
		Capabilities:    s.capabilities(mcp.NegotiateLegacyVersion(p.ProtocolVersion)),
		Instructions:    instructions,
	}
	x.version = res.ProtocolVersion
	x.client.ProtocolVersion = res.ProtocolVersion
	x.client.ClientInfo, x.client.Capabilities = p.ClientInfo, p.Capabilities
	if x.shared() {
		s.updateConn(x.conn, func(ci *ConnInfo) {
			ci.Node, ci.Principal = s.cfg.Node, x.c.Principal.Subject
			ci.ProtocolVersion = res.ProtocolVersion
			ci.ClientInfo, ci.Capabilities = p.ClientInfo, p.Capabilities
		})
	}
	return &res, nil
}

func (s *Server) serveDiscover(_ context.Context, x *exchange) (any, *rpcError) {
	return &mcp.DiscoverResult{SupportedVersions: x.versions, Capabilities: s.capabilities(mcp.ProtocolVersion20260728), Instructions: instructions}, nil
}

func (s *Server) serveSetLevel(_ context.Context, x *exchange) (any, *rpcError) {
	var p mcp.SetLevelParams
	if e := decode(x, &p); e != nil {
		return nil, e
	}
	if _, ok := validLevels[p.Level]; !ok {
		return nil, &rpcError{Code: codeInvalidParams, Message: fmt.Sprintf("invalid logging level '%s'", p.Level)}
	}
	x.client.LogLevel = p.Level
	if x.shared() {
		s.updateConn(x.conn, func(ci *ConnInfo) { ci.LogLevel = p.Level })
	}
	return mcp.EmptyResult{}, nil
}

var validLevels = map[mcp.LoggingLevel]struct{}{
	mcp.LoggingLevelDebug: {}, mcp.LoggingLevelInfo: {}, mcp.LoggingLevelNotice: {}, mcp.LoggingLevelWarning: {},
	mcp.LoggingLevelError: {}, mcp.LoggingLevelCritical: {}, mcp.LoggingLevelAlert: {}, mcp.LoggingLevelEmergency: {},
}

// paginate returns the page of items after cursor (the base64 of the last
// name the previous page held). The front does not cap pages: every list
// comes whole, and a cursor only resumes after a name.
func paginate[T mcp.Named](items []T, cursor mcp.Cursor) ([]T, *rpcError) {
	if cursor == "" {
		return items, nil
	}
	after, err := base64.StdEncoding.DecodeString(string(cursor))
	if err != nil {
		return nil, &rpcError{Code: codeInvalidParams, Message: "invalid cursor: " + err.Error()}
	}
	i := sort.Search(len(items), func(i int) bool { return items[i].GetName() > string(after) })
	return items[i:], nil
}

func (s *Server) serveToolsList(ctx context.Context, x *exchange) (any, *rpcError) {
	var p mcp.PaginatedParams
	if e := decode(x, &p); e != nil {
		return nil, e
	}
	view := s.listView(ctx, x.c, offersUI(ctx, x.env.Params))
	ext, _, _, _ := s.ext.lists()
	tools := make([]mcp.Tool, 0, len(view)+len(ext))
	for _, t := range view {
		tools = append(tools, s.marked(x.c, t.Tool))
	}
	for _, t := range ext {
		if _, shadowed := view[t.Name]; !shadowed {
			tools = append(tools, s.marked(x.c, t))
		}
	}
	page, e := paginate(byName(tools), p.Cursor)
	if e != nil {
		return nil, e
	}
	return &mcp.ListToolsResult{Tools: page}, nil
}

func (s *Server) serveToolsCall(ctx context.Context, x *exchange) (any, *rpcError) {
	var req mcp.CallToolRequest
	if !wire.DecodeCallTool(x.body, &req) {
		if e := decode(x, &req.Params); e != nil {
			return nil, e
		}
	}
	req.Method = x.env.Method
	req.Header = x.header
	tool, ok := s.findTool(x.c, req.Params.Name)
	if !ok {
		return nil, &rpcError{Code: codeInvalidParams, Message: fmt.Sprintf("tool '%s' not found: tool not found", req.Params.Name)}
	}
	if res, e, ok := s.callAsTask(ctx, x, tool, req); ok {
		return res, e
	}
	res, err := recovered(ctx, tool.Handler, req)
	if err == nil && res != nil && !x.modern {
		res, err = resolveInput(ctx, s, x, res, toolNeedsInput, func(ctx context.Context, rt mcp.MultiRoundTripParams) (*mcp.CallToolResult, error) {
			retried := req
			retried.Params.MultiRoundTripParams = rt
			return recovered(ctx, tool.Handler, retried)
		})
	}
	if err != nil {
		return nil, handlerError(x, err)
	}
	if res == nil {
		return nil, &rpcError{Code: codeInternal, Message: fmt.Sprintf("tool '%s' handler returned no result", req.Params.Name)}
	}
	return res, nil
}

// handlerError is the JSON-RPC error for a handler's error: a
// URL-elicitation-required error keeps its code and data on the
// session-based revisions, anything else is -32603.
func handlerError(x *exchange, err error) *rpcError {
	var required mcp.URLElicitationRequiredError
	var pointer *mcp.URLElicitationRequiredError
	if !x.modern {
		switch {
		case errors.As(err, &required):
			d := required.JSONRPCError().Error
			return &rpcError{Code: d.Code, Message: err.Error(), Data: d.Data}
		case errors.As(err, &pointer) && pointer != nil:
			d := pointer.JSONRPCError().Error
			return &rpcError{Code: d.Code, Message: err.Error(), Data: d.Data}
		}
	}
	return &rpcError{Code: codeInternal, Message: err.Error()}
}

// resourceNotFound is the code of an unknown resource: -32002 on the
// session-based revisions, invalid params on 2026-07-28.
func resourceNotFound(x *exchange, uri string) *rpcError {
	code := mcp.RESOURCE_NOT_FOUND
	if x.modern {
		code = codeInvalidParams
	}
	return &rpcError{Code: code, Message: fmt.Sprintf("handler not found for resource URI '%s': resource not found", uri)}
}

func (s *Server) serveResourcesList(ctx context.Context, x *exchange) (any, *rpcError) {
	var p mcp.PaginatedParams
	if e := decode(x, &p); e != nil {
		return nil, e
	}
	own := s.sessionResources(x.c)
	if offersUI(ctx, x.env.Params) {
		own[apps.URI] = appServerResource()
	}
	_, ext, _, _ := s.ext.lists()
	all := make([]mcp.Resource, 0, len(own)+len(ext))
	for _, r := range own {
		all = append(all, r.Resource)
	}
	page, e := paginate(byName(append(all, ext...)), p.Cursor)
	if e != nil {
		return nil, e
	}
	return &mcp.ListResourcesResult{Resources: page}, nil
}

func (s *Server) serveTemplatesList(_ context.Context, x *exchange) (any, *rpcError) {
	var p mcp.PaginatedParams
	if e := decode(x, &p); e != nil {
		return nil, e
	}
	_, _, all, _ := s.ext.lists()
	page, e := paginate(all, p.Cursor)
	if e != nil {
		return nil, e
	}
	return &mcp.ListResourceTemplatesResult{ResourceTemplates: page}, nil
}

func (s *Server) serveResourcesRead(ctx context.Context, x *exchange) (any, *rpcError) {
	var req mcp.ReadResourceRequest
	if e := decode(x, &req.Params); e != nil {
		return nil, e
	}
	req.Method, req.Header = x.env.Method, x.header
	h, ok := s.findResource(ctx, x, &req)
	if !ok {
		return nil, resourceNotFound(x, req.Params.URI)
	}
	contents, err := h(ctx, req)
	if err != nil {
		return nil, handlerError(x, err)
	}
	if contents == nil {
		contents = []mcp.ResourceContents{}
	}
	return &mcp.ReadResourceResult{Contents: contents}, nil
}

func (s *Server) serveSubscribe(_ context.Context, x *exchange) (any, *rpcError) {
	var p mcp.SubscribeParams
	if e := decode(x, &p); e != nil {
		return nil, e
	}
	if p.URI == "" {
		return nil, &rpcError{Code: codeInvalidParams, Message: "uri is required"}
	}
	if err := s.checkResourceAccess(x.c, p.URI); err != nil {
		return nil, &rpcError{Code: mcp.RESOURCE_NOT_FOUND, Message: err.Error()}
	}
	s.subscribe(x.conn, x.c.Principal, p.URI, true)
	return mcp.EmptyResult{}, nil
}

func (s *Server) serveUnsubscribe(_ context.Context, x *exchange) (any, *rpcError) {
	var p mcp.UnsubscribeParams
	if e := decode(x, &p); e != nil {
		return nil, e
	}
	if p.URI == "" {
		return nil, &rpcError{Code: codeInvalidParams, Message: "uri is required"}
	}
	s.subscribe(x.conn, x.c.Principal, p.URI, false)
	return mcp.EmptyResult{}, nil
}

func (s *Server) servePromptsList(_ context.Context, x *exchange) (any, *rpcError) {
	var p mcp.PaginatedParams
	if e := decode(x, &p); e != nil {
		return nil, e
	}
	_, _, _, all := s.ext.lists()
	page, e := paginate(all, p.Cursor)
	if e != nil {
		return nil, e
	}
	return &mcp.ListPromptsResult{Prompts: page}, nil
}

func (s *Server) servePromptsGet(ctx context.Context, x *exchange) (any, *rpcError) {
	var req mcp.GetPromptRequest
	if e := decode(x, &req.Params); e != nil {
		return nil, e
	}
	req.Method, req.Header = x.env.Method, x.header
	h, ok := s.findPrompt(req.Params.Name)
	if !ok {
		return nil, &rpcError{Code: codeInvalidParams, Message: fmt.Sprintf("prompt '%s' not found: prompt not found", req.Params.Name)}
	}
	res, err := h(ctx, req)
	if err == nil && res != nil && !x.modern {
		res, err = resolveInput(ctx, s, x, res, promptNeedsInput, func(ctx context.Context, rt mcp.MultiRoundTripParams) (*mcp.GetPromptResult, error) {
			retried := req
			retried.Params.MultiRoundTripParams = rt
			return h(ctx, retried)
		})
	}
	if err != nil {
		return nil, handlerError(x, err)
	}
	if res == nil {
		return nil, &rpcError{Code: codeInternal, Message: fmt.Sprintf("prompt '%s' handler returned no result", req.Params.Name)}
	}
	return res, nil
}

func (s *Server) serveComplete(ctx context.Context, x *exchange) (any, *rpcError) {
	var p mcp.CompleteParams
	if e := decode(x, &p); e != nil {
		return nil, e
	}
	var (
		c   *mcp.Completion
		err error
	)
	switch ref := p.Ref.(type) {
	case mcp.PromptReference:
		c, err = s.completePrompt(ctx, ref.Name, p.Argument, p.Context)
	case mcp.ResourceReference:
		c, err = s.completeResource(ctx, ref.URI, p.Argument, p.Context)
	default:
		return nil, &rpcError{Code: codeInvalidRequest, Message: fmt.Sprintf("unknown reference type: %v", ref)}
	}
	if err != nil {
		return nil, &rpcError{Code: codeInternal, Message: err.Error()}
	}
	if c == nil {
		c = &mcp.Completion{}
	}
	if c.Values == nil {
		c.Values = []string{}
	}
	return &mcp.CompleteResult{Completion: *c}, nil
}
