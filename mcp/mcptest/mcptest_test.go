package mcptest_test

import (
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/mcpswarm/mcpswarm/mcp/mcptest"
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
