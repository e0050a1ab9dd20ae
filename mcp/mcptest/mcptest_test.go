package mcptest_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"go.uber.org/goleak"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/mcp/mcptest"
	"github.com/mcpswarm/mcpswarm/session"
	"github.com/mcpswarm/mcpswarm/session/apps"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"))
}

func TestLoginFlow(t *testing.T) {
	h := mcptest.Start(t, "login")
	h.TypeInto("username", "demo").
		TypeInto("password", "hunter2").
		Click("submit").
		AssertComponent("status", func(c mcptest.Component) bool {
			return strings.Contains(c.Text(), "Signed in as demo")
		}).
		AssertComponent("greeting", func(c mcptest.Component) bool { return strings.Contains(c.Text(), "demo") })
	var m struct{ User string }
	h.Model(&m)
	if m.User != "demo" {
		t.Errorf("model user %q", m.User)
	}
	if _, ok := h.Component("submit"); ok {
		t.Error("the form is still shown after signing in")
	}
	h.Stop()
}

func TestCounterAndTools(t *testing.T) {
	h := mcptest.Start(t, "counter", mcptest.WithID("cnt"))
	h.Click("inc").Click("inc").Click("dec")
	if s := h.Screenshot(); !strings.Contains(s, "Count: 1") {
		t.Errorf("screenshot:\n%s", s)
	}
	var proj struct{ Count int }
	h.Resource("model/count", &proj)
	if proj.Count != 1 {
		t.Errorf("projection %d", proj.Count)
	}
	tools := strings.Join(h.Tools(), " ")
	if !strings.Contains(tools, "cnt.inc.click") || !strings.Contains(tools, "cnt.discover_tools") {
		t.Errorf("tools: %s", tools)
	}
}

// TestWithAppsMakesAnEmbeddersAppStartable: an app WithApps registers can
// be started and driven like a demo app.
func TestWithAppsMakesAnEmbeddersAppStartable(t *testing.T) {
	h := mcptest.Start(t, "tally", mcptest.WithApps(func(r *session.Registry) error {
		return r.Register("tally", "a counter under another name", func() session.App { return apps.Counter{} })
	}))
	h.Click("inc").Click("inc")
	if s := h.Screenshot(); !strings.Contains(s, "Count: 2") {
		t.Errorf("screenshot:\n%s", s)
	}
}

// TestWithGuardAuthorizesTheHarnessCalls: the node runs the guard the test
// gives: the tool it denies is hidden from the view and refused when
// called, the others are served.
func TestWithGuardAuthorizesTheHarnessCalls(t *testing.T) {
	g, err := authz.NewGuard(
		authz.AuthorizerFunc(func(_ context.Context, tool string, _ map[string]any, _ authz.Context) authz.Decision {
			if tool == "t.inc.click" {
				return authz.Deny("no incrementing here", "test")
			}
			return authz.Allow("test")
		}),
		authz.ReadAuthorizerFunc(func(context.Context, string, any, authz.Context) authz.Decision { return authz.Allow("test") }))
	if err != nil {
		t.Fatal(err)
	}
	h := mcptest.Start(t, "counter", mcptest.WithGuard(g))
	tools := h.Tools()
	if slices.Contains(tools, "t.inc.click") || !slices.Contains(tools, "t.dec.click") {
		t.Errorf("tools under the guard: %v, want t.dec.click without t.inc.click", tools)
	}
	req := mcpgo.CallToolRequest{}
	req.Params.Name = "t.inc.click"
	if res, err := h.Client().CallTool(context.Background(), req); err == nil && !res.IsError {
		t.Errorf("the denied tool was served: %v", res.Content)
	}
	h.Click("dec")
	if s := h.Screenshot(); !strings.Contains(s, "Count: -1") {
		t.Errorf("screenshot:\n%s", s)
	}
}
