package authz

// TaskSupport is a policy's mark on a tool: whether a call of it may, or
// must, run as a task (MCP's execution.taskSupport). Its values are MCP's
// own, so a front converts it as it is.
type TaskSupport string

// The marks a tools rule may carry (task: optional | required | forbidden).
const (
	// TaskOptional: a client that supports tasks gets one when the call
	// outlasts the front's grace; any other client waits for the result.
	TaskOptional TaskSupport = "optional"
	// TaskRequired: the call runs only as a task.
	TaskRequired TaskSupport = "required"
	// TaskForbidden: the call never runs as a task, whatever the tool
	// itself declares (an exception carved out before a broader mark).
	TaskForbidden TaskSupport = "forbidden"
)

// Valid reports whether t is one of the three marks.
func (t TaskSupport) Valid() bool {
	return t == TaskOptional || t == TaskRequired || t == TaskForbidden
}

// TaskMarker is implemented by a tool authorizer that marks tools as
// long-running (a Policy does, from its rules' task key). An embedder's
// authorizer may implement it too.
type TaskMarker interface {
	// TaskSupport returns the mark on tool for c, or "" when there is none.
	TaskSupport(tool string, c Context) TaskSupport
}

// TaskSupport is the guard's mark on tool for the caller c: "" when its tool
// authorizer marks nothing (the tool's own declaration stands; a guard
// without a policy, --dev included, marks nothing), or TaskOptional,
// TaskRequired or TaskForbidden, which the front applies over the tool's
// declaration. It says how an allowed call runs, not whether it is allowed:
// Decide answers that. A marker that panics or answers an unknown value
// marks nothing, and the call runs as it would without the policy's mark.
func (g Guard) TaskSupport(c Context, tool string) (t TaskSupport) {
	m, ok := g.Tools.(TaskMarker)
	if !ok || usable("task marker", m) != nil {
		return ""
	}
	defer func() {
		if r := recover(); r != nil {
			t = ""
		}
	}()
	if t = m.TaskSupport(tool, c); t != "" && !t.Valid() {
		return ""
	}
	return t
}
