// Package mcptest drives an app through the real MCP transport: an
// in-process one-node swarm (a whole mcpswarm node on an in-memory
// network) and mcp-go's client, so what a test exercises is what an agent
// hits.
//
//	h := mcptest.Start(t, "login")
//	h.TypeInto("username", "demo").
//		TypeInto("password", "hunter2").
//		Click("submit").
//		AssertComponent("status", func(c mcptest.Component) bool {
//			return strings.Contains(c.Text(), "Signed in")
//		})
package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm"
	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/internal/memnet"
	"github.com/mcpswarm/mcpswarm/mcp"
	"github.com/mcpswarm/mcpswarm/session"
	"github.com/mcpswarm/mcpswarm/session/apps"
)

// Component is one widget of the session's widgets resource: "kind", "id",
// "actions" and "state".
type Component map[string]any

// State returns the widget's described state.
func (c Component) State() map[string]any {
	s, _ := c["state"].(map[string]any)
	return s
}

// Text returns the widget's state rendered as text (its text, label,
// value or items, whichever it describes), for simple assertions.
func (c Component) Text() string {
	s := c.State()
	for _, k := range []string{"text", "value", "label", "items"} {
		if v, ok := s[k]; ok {
			return fmt.Sprint(v)
		}
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// Harness is one app session driven over MCP. Its methods fail the test on
// error and return the harness, so calls chain.
type Harness struct {
	t      testing.TB
	id     string
	client *client.Client
	node   *mcpswarm.Node
	ctx    context.Context
}

type options struct {
	id       string
	register func(*session.Registry) error
	guard    *authz.Guard
}

// Option configures Start.
type Option func(*options)

// WithID sets the session id (default "t").
func WithID(id string) Option { return func(o *options) { o.id = id } }

// WithApps registers more apps (all registered apps are startable).
func WithApps(register func(*session.Registry) error) Option {
	return func(o *options) { o.register = register }
}

// WithGuard replaces the development policy (allow all, --dev) with g; the
// node's boot checks apply, so its authorizers must be SourceConfigured
// (authz.NewGuard makes them so).
func WithGuard(g authz.Guard) Option { return func(o *options) { o.guard = &g } }

// Start starts a one-node swarm with the demo apps (and those WithApps
// registers, all startable) in a temporary data dir, connects a client
// over Streamable HTTP (protocol 2025-11-25) and starts app.
func Start(t testing.TB, app string, opts ...Option) *Harness {
	t.Helper()
	o := options{id: "t"}
	for _, f := range opts {
		f(&o)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := session.NewRegistry()
	if err := apps.Register(reg); err != nil {
		t.Fatalf("mcptest: %v", err)
	}
	if o.register != nil {
		if err := o.register(reg); err != nil {
			t.Fatalf("mcptest: registering apps: %v", err)
		}
	}
	cfg := mcpswarm.DefaultConfig()
	cfg.Name = "mcptest"
	cfg.DataDir = t.TempDir()
	cfg.Startable = reg.Names()
	cfg.Keepalive = time.Hour
	cfg.ShutdownTimeout = 5 * time.Second
	nw := memnet.New()
	ep := nw.Node(cfg.Name)
	cfg.GossipAddr = ep.GossipAddr
	nodeOpts := []mcpswarm.Option{mcpswarm.WithNetwork(ep), mcpswarm.WithLogger(log)}
	if o.register != nil {
		nodeOpts = append(nodeOpts, mcpswarm.WithApps(o.register))
	}
	if o.guard != nil {
		nodeOpts = append(nodeOpts, mcpswarm.WithGuard(*o.guard))
	} else {
		cfg.Dev = true
	}
	node, err := mcpswarm.NewNode(cfg, nodeOpts...)
	if err != nil {
		t.Fatalf("mcptest: configuring the node: %v", err)
	}
	if err := node.Start(context.Background()); err != nil {
		t.Fatalf("mcptest: starting the node: %v", err)
	}
	tr, err := transport.NewStreamableHTTP("http://"+node.HTTPAddr()+"/mcp", transport.WithHTTPLogger(log),
		transport.WithHTTPBasicClient(&http.Client{Transport: nw.HTTPTransport()}))
	if err != nil {
		t.Fatalf("mcptest: %v", err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcpgo.ProtocolVersion20251125))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Close()
		if err := node.Stop(ctx); err != nil {
			t.Errorf("mcptest: stopping the node: %v", err)
		}
		nw.HTTPTransport().CloseIdleConnections()
	})
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("mcptest: starting the client: %v", err)
	}
	init := mcpgo.InitializeRequest{}
	init.Params.ClientInfo = mcpgo.Implementation{Name: "mcptest", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("mcptest: initializing: %v", err)
	}
	h := &Harness{t: t, id: o.id, client: c, node: node, ctx: ctx}
	if r := h.call("swarm_start", map[string]any{"app": app, "id": o.id}); r.IsError {
		t.Fatalf("mcptest: starting %s: %s", app, resultText(r))
	}
	return h
}

// Client returns the MCP client (for calls the harness does not wrap).
func (h *Harness) Client() *client.Client { return h.client }

// Node returns the node serving the app.
func (h *Harness) Node() *mcpswarm.Node { return h.node }

// SessionID returns the app session's id.
func (h *Harness) SessionID() string { return h.id }

func resultText(r *mcpgo.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(mcpgo.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func (h *Harness) call(name string, args map[string]any) *mcpgo.CallToolResult {
	h.t.Helper()
	req := mcpgo.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	r, err := h.client.CallTool(h.ctx, req)
	if err != nil {
		h.t.Fatalf("mcptest: calling %s: %v", name, err)
	}
	return r
}

// Act runs action on widget with args (the derived tool
// <session>.<widget>.<action>) and fails the test on a tool error.
func (h *Harness) Act(widget, action string, args map[string]any) *Harness {
	h.t.Helper()
	name := h.id + "." + widget + "." + action
	if r := h.call(name, args); r.IsError {
		h.t.Fatalf("mcptest: %s: %s", name, resultText(r))
	}
	return h
}

// Read runs a read action and returns its text result.
func (h *Harness) Read(widget, action string, args map[string]any) string {
	h.t.Helper()
	name := h.id + "." + widget + "." + action
	r := h.call(name, args)
	if r.IsError {
		h.t.Fatalf("mcptest: %s: %s", name, resultText(r))
	}
	return resultText(r)
}

// TypeInto types text into a text input, password field or text area.
func (h *Harness) TypeInto(widget, text string) *Harness {
	h.t.Helper()
	return h.Act(widget, "type_into", map[string]any{"text": text})
}

// Clear empties a text input.
func (h *Harness) Clear(widget string) *Harness {
	h.t.Helper()
	return h.Act(widget, "clear", nil)
}

// Click clicks a button.
func (h *Harness) Click(widget string) *Harness {
	h.t.Helper()
	return h.Act(widget, "click", nil)
}

// Toggle toggles a checkbox.
func (h *Harness) Toggle(widget string) *Harness {
	h.t.Helper()
	return h.Act(widget, "toggle", nil)
}

// Select selects value in a select list or menu.
func (h *Harness) Select(widget, value string) *Harness {
	h.t.Helper()
	return h.Act(widget, "select", map[string]any{"value": value})
}

// SendKey sends a key press to the session.
func (h *Harness) SendKey(key string) *Harness {
	h.t.Helper()
	if r := h.call("swarm_send_key", map[string]any{"id": h.id, "key": key}); r.IsError {
		h.t.Fatalf("mcptest: send key %s: %s", key, resultText(r))
	}
	return h
}

// Screenshot returns the session's view as text.
func (h *Harness) Screenshot() string {
	h.t.Helper()
	return resultText(h.call("swarm_screenshot", map[string]any{"id": h.id}))
}

// Model decodes the session's model into v.
func (h *Harness) Model(v any) *Harness {
	h.t.Helper()
	r := h.call("swarm_get_model", map[string]any{"id": h.id})
	if r.IsError {
		h.t.Fatalf("mcptest: model: %s", resultText(r))
	}
	if err := json.Unmarshal([]byte(resultText(r)), v); err != nil {
		h.t.Fatalf("mcptest: decoding the model: %v", err)
	}
	return h
}

// Tools lists the session's derived tool names.
func (h *Harness) Tools() []string {
	h.t.Helper()
	res, err := h.client.ListTools(h.ctx, mcpgo.ListToolsRequest{})
	if err != nil {
		h.t.Fatalf("mcptest: listing tools: %v", err)
	}
	var out []string
	for _, tl := range res.Tools {
		if strings.HasPrefix(tl.Name, h.id+".") {
			out = append(out, tl.Name)
		}
	}
	return out
}

// Resource reads resource name ("widgets", "context", "model/<key>") of the
// session and decodes it into v.
func (h *Harness) Resource(name string, v any) *Harness {
	h.t.Helper()
	req := mcpgo.ReadResourceRequest{}
	req.Params.URI = mcp.SessionURI(h.id, name)
	res, err := h.client.ReadResource(h.ctx, req)
	if err != nil {
		h.t.Fatalf("mcptest: reading %s: %v", req.Params.URI, err)
	}
	tc, ok := res.Contents[0].(mcpgo.TextResourceContents)
	if !ok {
		h.t.Fatalf("mcptest: %s is not text", req.Params.URI)
	}
	if err := json.Unmarshal([]byte(tc.Text), v); err != nil {
		h.t.Fatalf("mcptest: decoding %s: %v", req.Params.URI, err)
	}
	return h
}

// Component returns the widget with id from the widgets resource; ok is
// false when it is not in the current view.
func (h *Harness) Component(id string) (Component, bool) {
	h.t.Helper()
	var tree map[string]any
	h.Resource("widgets", &tree)
	return find(tree, id)
}

func find(n map[string]any, id string) (Component, bool) {
	if n == nil {
		return nil, false
	}
	if n["id"] == id {
		return Component(n), true
	}
	kids, _ := n["children"].([]any)
	for _, k := range kids {
		if m, ok := k.(map[string]any); ok {
			if c, ok := find(m, id); ok {
				return c, true
			}
		}
	}
	return nil, false
}

// AssertComponent fails the test unless widget id is in the view and check
// accepts it.
func (h *Harness) AssertComponent(id string, check func(Component) bool) *Harness {
	h.t.Helper()
	c, ok := h.Component(id)
	if !ok {
		h.t.Fatalf("mcptest: widget %q is not in the session's current view", id)
	}
	if !check(c) {
		h.t.Fatalf("mcptest: widget %q failed the assertion: %v", id, map[string]any(c))
	}
	return h
}

// Stop stops the session.
func (h *Harness) Stop() {
	h.t.Helper()
	if r := h.call("swarm_stop", map[string]any{"id": h.id}); r.IsError {
		h.t.Fatalf("mcptest: stopping: %s", resultText(r))
	}
}
