package mcp

import (
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/session"
)

// TestADerivedToolThatStartsACommandMayRunAsATask: a widget action that
// starts a command (session.Tool.Task) is listed with taskSupport
// optional; any other derived tool declares nothing (forbidden).
func TestADerivedToolThatStartsACommandMayRunAsATask(t *testing.T) {
	long := mcpTool(session.Tool{Name: "s.run.click", Session: "s", Widget: "run", Action: "click", Sensitive: true, Task: true})
	if long.Execution == nil || long.Execution.TaskSupport != mcp.TaskSupportOptional {
		t.Errorf("execution of a command's tool = %+v, want taskSupport optional", long.Execution)
	}
	if plain := mcpTool(session.Tool{Name: "s.inc.click", Session: "s", Widget: "inc", Action: "click", Sensitive: true}); plain.Execution != nil {
		t.Errorf("execution of a plain tool = %+v, want none", plain.Execution)
	}
}
