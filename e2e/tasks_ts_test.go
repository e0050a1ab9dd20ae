package e2e

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTypeScriptSDKTasksAnswerOnEveryNodeAndOutliveTheirNode runs the
// TypeScript SDK 1.32.2's experimental tasks client (2025-11-25, SEP-1686)
// against three real nodes (e2e/interop/ts_tasks.mjs): tasks created
// through node1 are polled through node2 and node3, one is cancelled from
// node3, tasks/result through node3 waits for node1's task, and when the
// script says so the test kills node1 -9; the script then reads the
// finished task's result on node2 and node3 and sees the running one fail.
func TestTypeScriptSDKTasksAnswerOnEveryNodeAndOutliveTheirNode(t *testing.T) {
	nodeBin, dir := nodeJS(t)
	nodes := newTaskCluster(t)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	args := []string{filepath.Join(dir, "interop", "ts_tasks.mjs")}
	for _, n := range nodes {
		args = append(args, n.BaseURL()+"/mcp")
	}
	cmd := exec.CommandContext(ctx, nodeBin, append(args, aliceToken)...)
	cmd.Dir = dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting ts_tasks.mjs: %v", err)
	}
	var out strings.Builder
	killed := false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		if line == "kill: node1" {
			nodes[0].kill()
			killed = true
			if _, err := io.WriteString(stdin, "killed\n"); err != nil {
				t.Errorf("telling ts_tasks.mjs node1 is dead: %v", err)
			}
			_ = stdin.Close()
		}
	}
	err = cmd.Wait()
	t.Logf("ts_tasks.mjs output:\n%s%s", out.String(), stderr.String())
	if err != nil {
		t.Fatalf("ts_tasks.mjs: %v", err)
	}
	if !killed {
		t.Error("ts_tasks.mjs never asked for node1's kill")
	}
	if !strings.Contains(out.String(), "\ntasks: ok ") {
		t.Error("ts_tasks.mjs printed no closing line")
	}
}
