package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// closingLine is what ts_client.mjs prints when every check held.
var closingLine = regexp.MustCompile(`(?m)^interop: ok session=([a-z][a-z0-9]{0,6}) derived-tools=(\d+) list-changed=(\d+)$`)

// TestTypeScriptSDKDrivesLoginDemo connects the official TypeScript SDK to
// the real binary over Streamable HTTP, starts a login session, signs in
// through the derived tools, reads the session's widgets resource, and stops
// the session (e2e/interop/ts_client.mjs).
func TestTypeScriptSDKDrivesLoginDemo(t *testing.T) {
	nodeBin, dir := nodeJS(t)
	n := startNode(t, buildNode(t))

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBin, filepath.Join(dir, "interop", "ts_client.mjs"), n.MCPURL())
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	t.Logf("ts_client.mjs output:\n%s", out)
	if err != nil {
		t.Fatalf("ts_client.mjs: %v\nnode log tail:\n%s", err, tail(n.Log.String(), 30))
	}

	m := closingLine.FindSubmatch(out)
	if m == nil {
		t.Fatalf("no closing line %q in the output", closingLine)
	}
	id := string(m[1])
	derived, _ := strconv.Atoi(string(m[2]))
	changed, _ := strconv.Atoi(string(m[3]))
	// username (type_into, clear, get_value), password (type_into, clear), submit (click).
	if derived < 6 {
		t.Errorf("the login session derived %d tools, want at least 6", derived)
	}
	// At least one list_changed for swarm_start (checked before listing) and one for swarm_stop.
	if changed < 2 {
		t.Errorf("saw %d tools/list_changed notifications, want at least 2 (start and stop)", changed)
	}
	for _, want := range []string{
		"connected: server=mcpswarm protocol=2025-11-25",
		"started: session=" + id + " app=login owner=e2e",
		`status "Signed in as demo."`,
		"model: user=demo locked=false",
		"stopped: session=" + id,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(n.Log.String(), "hunter2") {
		t.Errorf("the node logged the password")
	}
}
