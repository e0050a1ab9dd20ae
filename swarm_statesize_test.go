package mcpswarm_test

import (
	"strings"
	"testing"
)

// Issue #13: one session's model grew without bound (25 × 4 MB typed into a
// todo took a node to 3.45 GiB and a 328 MiB bbolt file). With
// limits.session_state_bytes set, an update whose snapshot would pass it
// reaches the MCP client as a tool error naming the setting, and the
// session keeps its model. The bound here (16 KiB) is below what the todo
// app's own caps allow (100 items of 512 B), so only the policy's bound can
// refuse it.
func TestSessionStateBoundReachesTheClient(t *testing.T) {
	e := newSwarmEnv(t)
	e.limit("limits:\n  session_state_bytes: 16384\n")
	node := e.cluster(1)[0]
	alice := connect(t, node, connOpts{token: aliceToken})
	if res := alice.call("swarm_start", map[string]any{"app": "todo", "id": "big"}); res.IsError {
		t.Fatalf("start: %s", textOf(res))
	}
	title := strings.Repeat("t", 500)
	var refused, before string
	for i := 0; i < 100 && refused == ""; i++ {
		for _, step := range []struct {
			tool string
			args map[string]any
		}{{"big.new.type_into", map[string]any{"text": title}}, {"big.add.click", nil}} {
			before = textOf(alice.call("swarm_get_model", map[string]any{"id": "big"}))
			if res := alice.call(step.tool, step.args); res.IsError {
				refused = textOf(res)
				break
			}
		}
	}
	if refused == "" {
		t.Fatal("100 todo items of 500 bytes were accepted under a 16 KiB state bound")
	}
	for _, want := range []string{"session big: update refused: its state would be ", "over the 16 KiB per-session limit (limits.session_state_bytes)"} {
		if !strings.Contains(refused, want) {
			t.Errorf("refusal %q does not say %q", refused, want)
		}
	}
	if after := textOf(alice.call("swarm_get_model", map[string]any{"id": "big"})); after != before {
		t.Errorf("the refused update changed the model:\nbefore %.200s\nafter  %.200s", before, after)
	}
	if !strings.Contains(before, title) {
		t.Errorf("the model lost its items: %.200s", before)
	}
}
