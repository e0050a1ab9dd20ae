package task

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// Grace is how long a 2026-07-28 tools/call of a task-supporting tool
// waits for its handler before it answers with a task instead: a handler
// that answers within it answers directly (an optional tool, or a multi
// round-trip round) or as a task created already ended (a required tool).
const Grace = 100 * time.Millisecond

// Decide says how a tools/call of tool runs. modern marks a 2026-07-28
// request and declared whether it declared the tasks extension; param is
// a 2025-11-25 request's params.task. run false with no refusal is the
// synchronous call. In 2026-07-28 the server decides (a v1 task param is
// ignored, never promoting a forbidden tool); in 2025-11-25 the client
// opts in with params.task.
func Decide(tool *mcp.Tool, modern, declared bool, param *mcp.TaskParams) (run bool, spec Spec, refuse *Error) {
	support := mcp.TaskSupportForbidden
	if ex := tool.Execution; ex != nil && ex.TaskSupport != "" {
		support = ex.TaskSupport
	}
	switch {
	case modern && support == mcp.TaskSupportForbidden:
		return false, Spec{}, nil
	case modern && !declared && support == mcp.TaskSupportRequired:
		return false, Spec{}, MissingExtension(fmt.Sprintf("tool %q runs only as a task", tool.Name))
	case modern && !declared:
		return false, Spec{}, nil
	case modern:
		return true, Spec{Form: Extension, Grace: Grace,
			Sync: func(o Outcome) bool { return o.Input != nil || support == mcp.TaskSupportOptional }}, nil
	case param == nil && support == mcp.TaskSupportRequired:
		return false, Spec{}, &Error{Code: -32601, Message: fmt.Sprintf("tool '%s' requires task augmentation", tool.Name)}
	case param == nil:
		return false, Spec{}, nil
	case support == mcp.TaskSupportForbidden:
		return false, Spec{}, &Error{Code: -32601, Message: fmt.Sprintf("tool '%s' does not support task augmentation", tool.Name)}
	}
	spec = Spec{Form: Legacy}
	if param.TTL != nil {
		spec.TTL = time.Duration(*param.TTL) * time.Millisecond
	}
	return true, spec, nil
}

// MissingExtension is -32021 (MissingRequiredClientCapability) naming the
// tasks extension as what the request lacks.
func MissingExtension(why string) *Error {
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{ExtensionName: map[string]any{}}}})
	return &Error{Code: mcp.MISSING_REQUIRED_CLIENT_CAPABILITY, Data: data,
		Message: why + ": the request's _meta " + mcp.MetaKeyClientCapabilities + " does not declare the extension " + ExtensionName}
}

// ToolOutcome is a tool handler's answer as a task's outcome: fail (the
// protocol error of the handler's error) when set, else res; a 2025-11-25
// task cannot ask its client for input, so input_required fails it.
func ToolOutcome(res *mcp.CallToolResult, fail *Error, form Form) Outcome {
	switch {
	case fail != nil:
		return Outcome{Err: fail}
	case res == nil:
		return Outcome{Err: &Error{Code: CodeInternal, Message: "the tool handler returned no result"}}
	case res.NeedsInput() && form == Legacy:
		return Outcome{Err: &Error{Code: CodeInternal, Message: "the tool needs input, which a 2025-11-25 task cannot ask its client for"}}
	case res.NeedsInput():
		input, _ := json.Marshal(res.InputRequests)
		return Outcome{Input: input, State: res.RequestState}
	}
	b, err := json.Marshal(res)
	if err != nil {
		return Outcome{Err: &Error{Code: CodeInternal, Message: "encoding the result: " + err.Error()}}
	}
	return Outcome{Result: b, IsError: res.IsError}
}
