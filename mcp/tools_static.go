package mcp

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/session"
)

// startIDPattern is what swarm_start accepts as a session id: no "_" or "."
// (clients that rename tools would merge sessions) and at most 7
// characters (demo tool names stay within 64 after client prefixes).
var startIDPattern = regexp.MustCompile(`^[a-z][a-z0-9]{0,6}$`)

// reservedIDs may not be started over MCP: "swarm" is the static tools'
// prefix and "agent" the agent bridge's.
var reservedIDs = map[string]bool{"swarm": true, "agent": true}

// MetaSensitive is the tool _meta key marking a sensitive tool.
const MetaSensitive = "mcpswarm/sensitive"

type staticDef struct {
	name, description string
	schema            string
	readOnly          bool
	sensitive         bool
	destructive       bool
	// task: a call may run as a task (execution.taskSupport optional).
	task bool
	// ui says how the tool relates to the session app (apps.go).
	ui uiVisibility
}

var staticDefs = []staticDef{
	{name: "swarm_apps", description: "List the apps you can start with swarm_start.",
		schema: `{"type":"object","properties":{}}`, readOnly: true},
	{name: "swarm_start", description: "Start a session of an app. The session's widgets become tools named <id>.<widget>.<action>.",
		schema:    `{"type":"object","properties":{"app":{"type":"string","description":"app name from swarm_apps"},"id":{"type":"string","pattern":"^[a-z][a-z0-9]{0,6}$","description":"session id (1-7 lowercase letters/digits, starting with a letter); generated when absent"}},"required":["app"]}`,
		sensitive: true, destructive: true, ui: uiShows, task: true},
	{name: "swarm_list", description: "List your sessions: id, app and owner node.",
		schema: `{"type":"object","properties":{}}`, readOnly: true},
	{name: "swarm_stop", description: "Stop one of your sessions.",
		schema:    `{"type":"object","properties":{"id":{"type":"string","description":"session id"}},"required":["id"]}`,
		sensitive: true, destructive: true},
	{name: "swarm_screenshot", description: "Render one of your sessions' current view as text.",
		schema: `{"type":"object","properties":{"id":{"type":"string","description":"session id"}},"required":["id"]}`, readOnly: true, ui: uiShows},
	{name: "swarm_view", description: "Show one of your sessions: its current view as text, and as a live app the person can drive in hosts that render MCP Apps.",
		schema: `{"type":"object","properties":{"id":{"type":"string","description":"session id"}},"required":["id"]}`, readOnly: true, ui: uiShows},
	{name: "swarm_app_view", description: "Used by the session app: the widgets of one of your sessions (masked values omitted) and their revision; with since, waits up to wait_ms for the next revision.",
		schema:   `{"type":"object","properties":{"id":{"type":"string","description":"session id"},"since":{"type":"string","description":"the revision the app shows"},"wait_ms":{"type":"integer","minimum":0,"maximum":25000,"description":"how long to wait for a newer revision"}},"required":["id"]}`,
		readOnly: true, ui: uiAppOnly},
	{name: "swarm_get_model", description: "Return the whole model of one of your sessions (it may hold secrets).",
		schema: `{"type":"object","properties":{"id":{"type":"string","description":"session id"}},"required":["id"]}`, readOnly: true, sensitive: true},
	{name: "swarm_send_key", description: "Send a key press to one of your sessions.",
		schema:    `{"type":"object","properties":{"id":{"type":"string"},"key":{"type":"string","description":"key name, e.g. enter, tab, a"},"ctrl":{"type":"boolean"},"alt":{"type":"boolean"},"shift":{"type":"boolean"}},"required":["id","key"]}`,
		sensitive: true, destructive: true},
	{name: "swarm_members", description: "List the cluster's members and their state.",
		schema: `{"type":"object","properties":{}}`, readOnly: true},
}

func boolPtr(b bool) *bool { return &b }

func (d staticDef) tool() mcp.Tool {
	t := mcp.Tool{Name: d.name, Description: d.description, RawInputSchema: json.RawMessage(d.schema)}
	t.Annotations.ReadOnlyHint = boolPtr(d.readOnly)
	t.Annotations.DestructiveHint = boolPtr(d.destructive)
	t.Annotations.OpenWorldHint = boolPtr(false)
	if d.sensitive {
		t.Meta = mcp.NewMetaFromMap(map[string]any{MetaSensitive: true})
	}
	if d.task { // an app's Init may be slow
		t.Execution = &mcp.ToolExecution{TaskSupport: mcp.TaskSupportOptional}
	}
	return t
}

func (s *Server) staticTools() map[string]Tool {
	handlers := map[string]func(context.Context, authz.Context, mcp.CallToolRequest) *mcp.CallToolResult{
		"swarm_apps":       s.toolApps,
		"swarm_start":      s.toolStart,
		"swarm_list":       s.toolList,
		"swarm_stop":       s.toolStop,
		"swarm_screenshot": s.toolScreenshot,
		"swarm_get_model":  s.toolGetModel,
		"swarm_send_key":   s.toolSendKey,
		"swarm_members":    s.toolMembers,
		"swarm_view":       s.toolView,
		"swarm_app_view":   s.toolAppView,
	}
	out := make(map[string]Tool, len(staticDefs))
	for _, d := range staticDefs {
		h := handlers[d.name]
		out[d.name] = Tool{Tool: d.tool(), Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			c := s.authzContext(ctx)
			args := req.GetArguments()
			if res, ok := s.gate(ctx, req, c, d.name, args, d.sensitive); !ok {
				s.metrics.call("static", "refused")
				return res, nil
			}
			res := h(ctx, c, req)
			s.metrics.call("static", outcomeLabel(res))
			return res, nil
		}}
	}
	return out
}

func jsonResult(v any) *mcp.CallToolResult {
	b, err := json.Marshal(v)
	if err != nil {
		return toolError(fmt.Sprintf("encoding the result: %v", err), nil)
	}
	// The same bytes are the structured content on the wire: mcp-go writes
	// RawStructuredContent as is instead of encoding v a second time. v
	// stays for in-process readers (resources, tests).
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(string(b))}, StructuredContent: v, RawStructuredContent: b}
}

func toolError(text string, structured any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{mcp.NewTextContent(text)}, StructuredContent: structured}
}

func staleResult(id string) *mcp.CallToolResult {
	return toolError(fmt.Sprintf("session %q is not running (or is not yours); call swarm_list to see your sessions and swarm_start to start one", id),
		map[string]any{"error": "session_not_running", "session": id})
}

// backendError turns a Backend error into a tool error the agent can act on.
func backendError(id string, err error) *mcp.CallToolResult {
	if errors.Is(err, session.ErrNotRunning) {
		return staleResult(id)
	}
	return toolError(err.Error(), nil)
}

// ownedSession resolves id for c, refusing sessions c does not own.
func (s *Server) ownedSession(c authz.Context, id string) (SessionInfo, *mcp.CallToolResult) {
	info, ok := s.cfg.Backend.Lookup(id)
	if !ok || !authz.Owns(c.Principal, info.Principal) {
		return SessionInfo{}, staleResult(id)
	}
	if !info.Available {
		return SessionInfo{}, toolError(fmt.Sprintf("owner unavailable: node %s (session %q is hidden until a standby takes it over, its node returns or the grace period removes it); nothing ran: retry later", info.Owner, id),
			map[string]any{"error": "owner_unavailable", "session": id, "owner": info.Owner})
	}
	return info, nil
}

func (s *Server) toolApps(_ context.Context, _ authz.Context, _ mcp.CallToolRequest) *mcp.CallToolResult {
	apps := s.cfg.Backend.Apps()
	out := make([]map[string]any, 0, len(apps))
	for _, a := range apps {
		out = append(out, map[string]any{"name": a.Name, "description": a.Description})
	}
	return jsonResult(map[string]any{"apps": out})
}

func generateID() string {
	const first, rest = "abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyz0123456789"
	var b [7]byte
	_, _ = rand.Read(b[:])
	out := []byte{first[int(b[0])%len(first)]}
	for _, x := range b[1:] {
		out = append(out, rest[int(x)%len(rest)])
	}
	return string(out)
}

func (s *Server) toolStart(ctx context.Context, c authz.Context, req mcp.CallToolRequest) *mcp.CallToolResult {
	app := req.GetString("app", "")
	id := req.GetString("id", "")
	if app == "" {
		return toolError("swarm_start needs an app; call swarm_apps to see what you can start", nil)
	}
	if why := s.canOwn(ctx, c); why != "" {
		return toolError(why, map[string]any{"error": "ownership_needs_authentication"})
	}
	ctx = s.withReporters(ctx, req) // a slow Init reports its progress
	if id != "" && (!startIDPattern.MatchString(id) || reservedIDs[id]) {
		return toolError(fmt.Sprintf("invalid session id %q: use 1-7 lowercase letters or digits starting with a letter (not swarm or agent)", id),
			map[string]any{"error": "invalid_session_id", "id": id})
	}
	if res := s.sessionCap(c); res != nil {
		return res
	}
	var (
		info SessionInfo
		err  error
	)
	for attempt := 0; ; attempt++ {
		try := id
		if try == "" {
			try = generateID()
			if reservedIDs[try] {
				continue
			}
		}
		info, err = s.cfg.Backend.Start(ctx, c, app, try)
		if err == nil || id != "" || !errors.Is(err, session.ErrExists) || attempt >= 5 {
			break
		}
	}
	if err != nil {
		if res := s.takenID(c, id, err); res != nil {
			return res
		}
		return toolError(fmt.Sprintf("starting %s: %v", app, err), nil)
	}
	s.log.Info("session started", "session", info.ID, "app", info.App, "principal", c.Principal.Subject)
	return jsonResult(sessionJSON(info))
}

func sessionJSON(i SessionInfo) map[string]any {
	return map[string]any{"id": i.ID, "app": i.App, "owner": i.Owner, "available": i.Available,
		"status": i.Status, "created": i.Created}
}

func (s *Server) toolList(_ context.Context, c authz.Context, _ mcp.CallToolRequest) *mcp.CallToolResult {
	list := s.cfg.Backend.Sessions(c.Principal)
	out := make([]map[string]any, 0, len(list))
	for _, i := range list {
		out = append(out, sessionJSON(i))
	}
	return jsonResult(map[string]any{"sessions": out})
}

func (s *Server) toolStop(ctx context.Context, c authz.Context, req mcp.CallToolRequest) *mcp.CallToolResult {
	id := req.GetString("id", "")
	if _, res := s.ownedSession(c, id); res != nil {
		return res
	}
	if err := s.cfg.Backend.Stop(ctx, c, id); err != nil {
		return backendError(id, err)
	}
	return jsonResult(map[string]any{"stopped": id})
}

func (s *Server) toolScreenshot(ctx context.Context, c authz.Context, req mcp.CallToolRequest) *mcp.CallToolResult {
	id := req.GetString("id", "")
	if _, res := s.ownedSession(c, id); res != nil {
		return res
	}
	text, err := s.cfg.Backend.Screenshot(ctx, c, id)
	if err != nil {
		return backendError(id, err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(text)}}
}

func (s *Server) toolGetModel(ctx context.Context, c authz.Context, req mcp.CallToolRequest) *mcp.CallToolResult {
	id := req.GetString("id", "")
	if _, res := s.ownedSession(c, id); res != nil {
		return res
	}
	m, err := s.cfg.Backend.Model(ctx, c, id)
	if err != nil {
		return backendError(id, err)
	}
	var v any
	_ = json.Unmarshal(m, &v)
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(string(m))}, StructuredContent: map[string]any{"model": v}}
}

func (s *Server) toolSendKey(ctx context.Context, c authz.Context, req mcp.CallToolRequest) *mcp.CallToolResult {
	id := req.GetString("id", "")
	if _, res := s.ownedSession(c, id); res != nil {
		return res
	}
	k := session.Key{Key: req.GetString("key", ""), Ctrl: req.GetBool("ctrl", false), Alt: req.GetBool("alt", false), Shift: req.GetBool("shift", false)}
	if k.Key == "" {
		return toolError("swarm_send_key needs a key", nil)
	}
	res, err := s.cfg.Backend.SendKey(ctx, c, id, k)
	if err != nil {
		return backendError(id, err)
	}
	return sessionResult(res)
}

func (s *Server) toolMembers(_ context.Context, _ authz.Context, _ mcp.CallToolRequest) *mcp.CallToolResult {
	ms := s.cfg.Backend.Members()
	out := make([]map[string]any, 0, len(ms))
	for _, m := range ms {
		out = append(out, map[string]any{"name": m.Name, "state": m.State, "grpc": m.GRPCAddr, "version": m.Version, "self": m.Self})
	}
	return jsonResult(map[string]any{"members": out})
}

func sessionResult(r session.Result) *mcp.CallToolResult {
	out := &mcp.CallToolResult{IsError: r.IsError, Content: []mcp.Content{mcp.NewTextContent(r.Text)}}
	if r.Structured != nil {
		if _, isMap := r.Structured.(map[string]any); isMap {
			out.StructuredContent = r.Structured
		} else {
			out.StructuredContent = map[string]any{"value": r.Structured}
		}
	}
	return out
}

func outcomeLabel(r *mcp.CallToolResult) string {
	if r == nil || r.IsError {
		return "error"
	}
	return "ok"
}
