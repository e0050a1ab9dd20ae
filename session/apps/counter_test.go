package apps

import (
	"strings"
	"testing"

	"github.com/mcpswarm/mcpswarm/session"
)

func TestCounterEndToEnd(t *testing.T) {
	h := start(t, "counter")
	if h.hasTool("reset.click") {
		t.Fatal("reset is disabled at zero, yet derived a tool")
	}
	h.call("inc.click", nil)
	h.call("inc.click", nil)
	h.call("dec.click", nil)
	var m CounterModel
	h.model(&m)
	if m.Count != 1 {
		t.Fatalf("count = %d, want 1", m.Count)
	}
	if !strings.Contains(h.screen(), "Count: 1") {
		t.Errorf("screenshot lacks the count:\n%s", h.screen())
	}
	if _, err := h.m.SendKey(h.ctx, h.id, session.Key{Key: "+"}); err != nil {
		t.Fatal(err)
	}
	var p struct{ Count int }
	h.resource("model/count", &p)
	if p.Count != 2 {
		t.Errorf("model/count = %d, want 2", p.Count)
	}
	h.call("reset.click", nil)
	h.model(&m)
	if m.Count != 0 {
		t.Errorf("after reset count = %d", m.Count)
	}
	// reset is disabled again but its tool is sticky: calling it names the widget.
	if msg := h.callErr("reset.click", nil); !strings.Contains(msg, "`reset`") || !strings.Contains(msg, "no longer offers") {
		t.Errorf("reset while disabled: %q", msg)
	}
	for _, name := range []string{"inc.click", "dec.click", "reset.click", "discover_tools"} {
		if !h.hasTool(name) {
			t.Errorf("missing tool %s", name)
		}
	}
}
