package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// ToolHandler runs a tool call.
type ToolHandler func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error)

// ResourceHandler reads a resource (or a resource of a template).
type ResourceHandler func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error)

// PromptHandler renders a prompt.
type PromptHandler func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error)

// Tool is a tool the front serves: its definition and its handler.
type Tool struct {
	Tool    mcp.Tool
	Handler ToolHandler
}

// Resource is a resource the front serves.
type Resource struct {
	Resource mcp.Resource
	Handler  ResourceHandler
}

// ResourceTemplate is a resource template the front serves.
type ResourceTemplate struct {
	Template mcp.ResourceTemplate
	Handler  ResourceHandler
}

// Prompt is a prompt the front serves.
type Prompt struct {
	Prompt  mcp.Prompt
	Handler PromptHandler
}

// Extension holds what Config.Extend adds to the front's own surface:
// server-wide tools, resources, resource templates and prompts, visible to
// every connection (the tool authorizer still decides on each call). It is
// filled before the front serves and read-only after.
type Extension struct {
	mu        sync.RWMutex
	tools     map[string]Tool
	resources map[string]Resource
	templates []ResourceTemplate
	prompts   map[string]Prompt
}

func newExtension() *Extension {
	return &Extension{tools: map[string]Tool{}, resources: map[string]Resource{}, prompts: map[string]Prompt{}}
}

// AddTool adds (or replaces) a tool.
func (e *Extension) AddTool(t mcp.Tool, h ToolHandler) {
	e.mu.Lock()
	e.tools[t.Name] = Tool{Tool: t, Handler: h}
	e.mu.Unlock()
}

// AddResource adds (or replaces) a resource.
func (e *Extension) AddResource(r mcp.Resource, h ResourceHandler) {
	e.mu.Lock()
	e.resources[r.URI] = Resource{Resource: r, Handler: h}
	e.mu.Unlock()
}

// AddResourceTemplate adds a resource template; a URI it matches is read by
// h unless a resource of that exact URI exists.
func (e *Extension) AddResourceTemplate(t mcp.ResourceTemplate, h ResourceHandler) {
	e.mu.Lock()
	e.templates = append(e.templates, ResourceTemplate{Template: t, Handler: h})
	e.mu.Unlock()
}

// AddPrompt adds (or replaces) a prompt.
func (e *Extension) AddPrompt(p mcp.Prompt, h PromptHandler) {
	e.mu.Lock()
	e.prompts[p.Name] = Prompt{Prompt: p, Handler: h}
	e.mu.Unlock()
}

func (e *Extension) tool(name string) (Tool, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	t, ok := e.tools[name]
	return t, ok
}

func (e *Extension) resource(uri string) (Resource, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	r, ok := e.resources[uri]
	return r, ok
}

// template returns the first template matching uri.
func (e *Extension) template(uri string) (ResourceTemplate, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	for _, t := range e.templates {
		if t.Template.URITemplate != nil && t.Template.URITemplate.Regexp().MatchString(uri) {
			return t, true
		}
	}
	return ResourceTemplate{}, false
}

func (e *Extension) prompt(name string) (Prompt, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	p, ok := e.prompts[name]
	return p, ok
}

// lists returns the extension's tools, resources, templates and prompts,
// each sorted by name.
func (e *Extension) lists() ([]mcp.Tool, []mcp.Resource, []mcp.ResourceTemplate, []mcp.Prompt) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	tools := make([]mcp.Tool, 0, len(e.tools))
	for _, t := range e.tools {
		tools = append(tools, t.Tool)
	}
	res := make([]mcp.Resource, 0, len(e.resources))
	for _, r := range e.resources {
		res = append(res, r.Resource)
	}
	tpl := make([]mcp.ResourceTemplate, 0, len(e.templates))
	for _, t := range e.templates {
		tpl = append(tpl, t.Template)
	}
	ps := make([]mcp.Prompt, 0, len(e.prompts))
	for _, p := range e.prompts {
		ps = append(ps, p.Prompt)
	}
	return byName(tools), byName(res), byName(tpl), byName(ps)
}

// byName sorts items by name, as lists are paginated.
func byName[T mcp.Named](items []T) []T {
	slices.SortFunc(items, func(a, b T) int { return strings.Compare(a.GetName(), b.GetName()) })
	return items
}

// Client is the calling client as a handler sees it: what it declared, and
// the way back to it while the request runs. ClientFrom returns it.
type Client struct{ x *exchange }

// ClientFrom returns the client of the request a handler serves; ok is
// false outside a request.
func ClientFrom(ctx context.Context) (Client, bool) {
	x := exchangeFrom(ctx)
	return Client{x}, x != nil
}

// Capabilities are the capabilities the client declared.
func (c Client) Capabilities() mcp.ClientCapabilities { return c.x.client.Capabilities }

// Wants reports whether the client's log level admits a message at level.
func (c Client) Wants(level mcp.LoggingLevel) bool {
	min := c.x.logLevel()
	return min != "" && level.ShouldSendTo(min)
}

// Notify sends a notification on the request's own stream.
func (c Client) Notify(method string, params map[string]any) error {
	n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{Method: method}}
	n.Params.AdditionalFields = params
	return c.x.out.notify(n)
}

// Log sends a log message when the client's level admits it.
func (c Client) Log(level mcp.LoggingLevel, logger string, data any) error {
	if !c.Wants(level) {
		return nil
	}
	return c.Notify(string(mcp.MethodNotificationMessage), map[string]any{"level": level, "logger": logger, "data": data})
}

// Elicit asks the client for input and waits for its answer.
func (c Client) Elicit(ctx context.Context, p mcp.ElicitationParams) (*mcp.ElicitationResult, error) {
	var res mcp.ElicitationResult
	if err := c.ask(ctx, string(mcp.MethodElicitationCreate), p, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Sample asks the client's model for a message and waits for it.
func (c Client) Sample(ctx context.Context, p mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	var res mcp.CreateMessageResult
	if err := c.ask(ctx, string(mcp.MethodSamplingCreateMessage), p, &res); err != nil {
		return nil, err
	}
	// Content decodes as a map: make it the typed content it names.
	content, err := mcp.ParseSamplingContent(res.Content)
	if err != nil {
		return nil, fmt.Errorf("reading the client's answer to %s: %w", mcp.MethodSamplingCreateMessage, err)
	}
	res.Content = content
	return &res, nil
}

// Roots asks the client for its roots.
func (c Client) Roots(ctx context.Context) (*mcp.ListRootsResult, error) {
	var res mcp.ListRootsResult
	if err := c.ask(ctx, string(mcp.MethodListRoots), struct{}{}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

func (c Client) ask(ctx context.Context, method string, params, into any) error {
	raw, err := c.x.out.ask(ctx, method, params)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("reading the client's answer to %s: %w", method, err)
	}
	return nil
}

// logLevel is the least severe level the client wants log messages of: the
// one it set, else error on a connection (the session-based default) and none on a
// 2026-07-28 request.
func (x *exchange) logLevel() mcp.LoggingLevel {
	if l := x.client.LogLevel; l != "" || x.modern {
		return l
	}
	return mcp.LoggingLevelError
}
