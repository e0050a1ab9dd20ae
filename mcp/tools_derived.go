package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/session"
)

var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// mcpTool converts a derived tool definition. Only true sensitive and
// destructive claims survive (they can only add the authorizer
// requirement); readOnlyHint is set from the action kind, which the
// session derives, never from app text.
func mcpTool(t session.Tool) mcp.Tool {
	schema := t.InputSchema
	if len(schema) == 0 {
		schema = emptySchema
	}
	out := mcp.Tool{Name: t.Name, Description: t.Description, RawInputSchema: schema}
	out.Annotations.ReadOnlyHint = boolPtr(t.ReadOnly)
	if t.Destructive {
		out.Annotations.DestructiveHint = boolPtr(true)
	}
	if t.Sensitive {
		out.Meta = mcp.NewMetaFromMap(map[string]any{MetaSensitive: true})
	}
	if t.Task { // its action starts a command: work that outlives the call
		out.Execution = &mcp.ToolExecution{TaskSupport: mcp.TaskSupportOptional}
	}
	return out
}

func toolName(t session.Tool) string { return t.Name }

// listView is the caller's tools/list view (ui: the client is offered the
// session app, apps.go): static and derived tools the
// tool authorizer allows or asks about, entry by entry. Only Deny hides: an
// Ask entry is listed with the MetaApproval mark and gated at call time.
func (s *Server) listView(ctx context.Context, c authz.Context, ui bool) map[string]Tool {
	derived := authz.VisibleTools(ctx, s.cfg.Guard.Tools, c, s.cfg.Backend.Tools(c.Principal), toolName)
	static := authz.VisibleTools(ctx, s.cfg.Guard.Tools, c, staticDefs, func(d staticDef) string { return d.name })
	out := make(map[string]Tool, len(derived)+len(static))
	tools := s.static
	if ui {
		tools = s.staticUI
	}
	for _, l := range static {
		if l.Tool.ui == uiAppOnly && !ui {
			continue
		}
		out[l.Tool.name] = askMarked(tools[l.Tool.name], l.Ask, l.Prompt)
	}
	for _, l := range derived {
		out[l.Tool.Name] = askMarked(s.tools.get(l.Tool, s.derivedHandler), l.Ask, l.Prompt)
	}
	return out
}

// MetaApproval is the tool _meta key marking a listed tool whose calls need
// the user's approval; its value is the question the call will ask.
const MetaApproval = "mcpswarm/requiresApproval"

// askMarked returns st, or for an Ask a copy marked as needing approval (the
// cached definition is shared, so it is never modified).
func askMarked(st Tool, ask bool, prompt string) Tool {
	if !ask {
		return st
	}
	meta := map[string]any{}
	if st.Tool.Meta != nil {
		maps.Copy(meta, st.Tool.Meta.AdditionalFields)
	}
	if prompt == "" {
		prompt = "approve this call"
	}
	meta[MetaApproval] = prompt
	st.Tool.Meta = mcp.NewMetaFromMap(meta)
	st.Tool.Description = strings.TrimSpace(st.Tool.Description + " (Needs your approval: each call asks first.)")
	return st
}

// maxCachedTools bounds the converted-tool cache; past it the cache starts
// over (it is only a cache).
const maxCachedTools = 1 << 17

// toolCache keeps each derived tool's MCP form, so a listing does not
// rebuild (and allocate) every definition on every request. Entries are
// grouped by session and dropped when the session stops (forgetSession):
// tool names are unique per session, so without that the tools of every
// stopped session stayed until maxCachedTools (issue #13's soak: ~3 KiB per
// ended session per node).
type toolCache struct {
	mu sync.RWMutex
	m  map[string]map[string]cachedTool // session -> tool name -> tool
	n  int
}

type cachedTool struct {
	def session.Tool
	st  Tool
}

func sameTool(a, b session.Tool) bool {
	return a.Name == b.Name && a.Session == b.Session && a.Widget == b.Widget && a.Action == b.Action &&
		a.Kind == b.Kind && a.Description == b.Description && bytes.Equal(a.InputSchema, b.InputSchema) &&
		a.ReadOnly == b.ReadOnly && a.Sensitive == b.Sensitive && a.Destructive == b.Destructive && a.Task == b.Task
}

// get returns t's cached tool, building it when t is new or changed.
func (c *toolCache) get(t session.Tool, handler func(session.Tool) ToolHandler) Tool {
	c.mu.RLock()
	e, ok := c.m[t.Session][t.Name]
	c.mu.RUnlock()
	if ok && sameTool(e.def, t) {
		return e.st
	}
	st := Tool{Tool: mcpTool(t), Handler: handler(t)}
	e = cachedTool{def: t, st: st}
	c.mu.Lock()
	if c.m == nil || c.n >= maxCachedTools {
		c.m, c.n = make(map[string]map[string]cachedTool), 0
	}
	byName := c.m[t.Session]
	if byName == nil {
		byName = make(map[string]cachedTool)
		c.m[t.Session] = byName
	}
	if _, had := byName[t.Name]; !had {
		c.n++
	}
	byName[t.Name] = e
	c.mu.Unlock()
	return st
}

// forgetSession drops the cached tools of session id.
func (c *toolCache) forgetSession(id string) {
	c.mu.Lock()
	c.n -= len(c.m[id])
	delete(c.m, id)
	c.mu.Unlock()
}

// size is how many tools are cached.
func (c *toolCache) size() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.n
}

// findTool resolves a tools/call's name for the caller: a static tool,
// one of the caller's derived tools whatever the authorizer says (the call
// itself is gated, and an Ask must be able to elicit), an extension's
// tool, or, for a derived-shaped name whose session the caller does not
// have, a tool answering why instead of "tool not found".
func (s *Server) findTool(c authz.Context, name string) (Tool, bool) {
	if st, ok := s.static[name]; ok {
		return st, true
	}
	if st, ok := s.ext.tool(name); ok {
		return st, true
	}
	sid, derived := splitDerived(name)
	if !derived {
		return Tool{}, false
	}
	for _, t := range s.cfg.Backend.Tools(c.Principal) {
		if t.Name == name {
			return s.tools.get(t, s.derivedHandler), true
		}
	}
	stale := mcp.Tool{Name: name, RawInputSchema: emptySchema}
	return Tool{Tool: stale, Handler: func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if info, ok := s.cfg.Backend.Lookup(sid); ok && authz.Owns(c.Principal, info.Principal) {
			if !info.Available {
				_, res := s.ownedSession(c, sid)
				return res, nil
			}
			return toolError(fmt.Sprintf("session %q has no tool %q (the widget may have left the view); call %s.discover_tools or swarm_screenshot", sid, name, sid), nil), nil
		}
		return staleResult(sid), nil
	}}, true
}

func (s *Server) derivedHandler(t session.Tool) ToolHandler {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		c := s.authzContext(ctx)
		args := req.GetArguments()
		if _, res := s.ownedSession(c, t.Session); res != nil {
			s.metrics.call("derived", "refused")
			return res, nil
		}
		if res, ok := s.gate(ctx, req, c, t.Name, args, t.Sensitive || t.Destructive); !ok {
			s.metrics.call("derived", "refused")
			return res, nil
		}
		ctx = s.withReporters(ctx, req)
		if raw := req.Params.RawArguments; args != nil && len(raw) > 0 {
			// args is raw's decode: a forward passes raw on as it came.
			ctx = session.WithArgumentsJSON(ctx, t.Name, raw)
		}
		r, err := s.cfg.Backend.Call(ctx, c, t.Session, t.Name, args)
		if err != nil {
			s.metrics.call("derived", "error")
			return backendError(t.Session, err), nil
		}
		s.sessionLog(ctx, mcp.LoggingLevelInfo, "session %s: %s ran", t.Session, t.Name)
		res := sessionResult(r)
		s.metrics.call("derived", outcomeLabel(res))
		return res, nil
	}
}

// withReporters puts a progress reporter for this call into ctx: each
// report becomes notifications/progress with the request's progress token.
func (s *Server) withReporters(ctx context.Context, req mcp.CallToolRequest) context.Context {
	if req.Params.Meta == nil || req.Params.Meta.ProgressToken == nil {
		return ctx
	}
	token := req.Params.Meta.ProgressToken
	client, ok := ClientFrom(ctx)
	if !ok {
		return ctx
	}
	return session.WithProgress(ctx, func(progress, total float64, message string) {
		p := map[string]any{"progressToken": token, "progress": progress}
		if total > 0 {
			p["total"] = total
		}
		if message != "" {
			p["message"] = message
		}
		if err := client.Notify("notifications/progress", p); err != nil {
			s.log.Debug("progress notification dropped", "err", err)
		}
	})
}

// sessionLog sends a log message to the calling client, subject to its
// log level. The message is formatted only when it is sent: at the
// default level (error) nearly none is.
func (s *Server) sessionLog(ctx context.Context, level mcp.LoggingLevel, format string, args ...any) {
	client, ok := ClientFrom(ctx)
	if !ok {
		return
	}
	if !client.Wants(level) {
		return
	}
	if err := client.Log(level, "mcpswarm", fmt.Sprintf(format, args...)); err != nil {
		s.log.Debug("log notification dropped", "err", err)
	}
}
