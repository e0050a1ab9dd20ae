package task

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

func toolWith(support mcp.TaskSupport) *mcp.Tool {
	t := mcp.NewTool("t")
	if support != "" {
		t.Execution = &mcp.ToolExecution{TaskSupport: support}
	}
	return &t
}

func TestWhichCallsBecomeTasks(t *testing.T) {
	ttl := int64(1500)
	v1 := &mcp.TaskParams{TTL: &ttl}
	for _, c := range []struct {
		name             string
		support          mcp.TaskSupport
		modern, declared bool
		param            *mcp.TaskParams
		run              bool
		code             int
	}{
		{"2026 forbidden, a v1 param ignored", "", true, true, v1, false, 0},
		{"2026 optional with the extension", mcp.TaskSupportOptional, true, true, nil, true, 0},
		{"2026 optional without it runs inline", mcp.TaskSupportOptional, true, false, nil, false, 0},
		{"2026 required without it", mcp.TaskSupportRequired, true, false, nil, false, mcp.MISSING_REQUIRED_CLIENT_CAPABILITY},
		{"2025 optional without params.task", mcp.TaskSupportOptional, false, false, nil, false, 0},
		{"2025 optional with params.task", mcp.TaskSupportOptional, false, false, v1, true, 0},
		{"2025 required without params.task", mcp.TaskSupportRequired, false, false, nil, false, -32601},
		{"2025 forbidden with params.task", mcp.TaskSupportForbidden, false, false, v1, false, -32601},
	} {
		run, spec, refuse := Decide(toolWith(c.support), c.modern, c.declared, c.param)
		code := 0
		if refuse != nil {
			code = refuse.Code
		}
		if run != c.run || code != c.code {
			t.Errorf("%s: run %v refuse %v, want run %v code %d", c.name, run, refuse, c.run, c.code)
		}
		if run && c.modern && (spec.Form != Extension || spec.Grace != Grace) {
			t.Errorf("%s: spec %+v", c.name, spec)
		}
		if run && !c.modern && (spec.Form != Legacy || spec.TTL.Milliseconds() != ttl || spec.Grace != 0) {
			t.Errorf("%s: spec %+v", c.name, spec)
		}
	}
	_, _, refuse := Decide(toolWith(mcp.TaskSupportRequired), true, false, nil)
	var data map[string]map[string]map[string]any
	if err := json.Unmarshal(refuse.Data, &data); err != nil || data["requiredCapabilities"]["extensions"][ExtensionName] == nil {
		t.Errorf("-32021 data %s does not name the extension", refuse.Data)
	}
}

func TestWithinTheGraceWhatAnswersDirectly(t *testing.T) {
	_, optional, _ := Decide(toolWith(mcp.TaskSupportOptional), true, true, nil)
	_, required, _ := Decide(toolWith(mcp.TaskSupportRequired), true, true, nil)
	input := Outcome{Input: json.RawMessage(`{}`)}
	done := Outcome{Result: json.RawMessage(`{}`)}
	if !optional.Sync(input) || !optional.Sync(done) || !required.Sync(input) || required.Sync(done) {
		t.Fatal("an input round answers directly always, a result only for an optional tool")
	}
}

func TestAHandlersAnswerAsAnOutcome(t *testing.T) {
	res := mcp.NewToolResultError("bad")
	if o := ToolOutcome(res, nil, Extension); !o.IsError || !strings.Contains(string(o.Result), "bad") {
		t.Errorf("a tool error: %+v", o)
	}
	if o := ToolOutcome(nil, &Error{Code: 1, Message: "x"}, Extension); o.Err == nil || o.Err.Code != 1 {
		t.Errorf("a handler error: %+v", o)
	}
	if o := ToolOutcome(nil, nil, Extension); o.Err == nil {
		t.Errorf("no result: %+v", o)
	}
	ask := &mcp.CallToolResult{}
	ask.ResultType = mcp.ResultTypeInputRequired
	ask.InputRequests = mcp.InputRequests{"k": mcp.NewRootsInputRequest()}
	ask.RequestState = "st"
	if o := ToolOutcome(ask, nil, Extension); o.State != "st" || !strings.Contains(string(o.Input), `"k"`) {
		t.Errorf("an input round: %+v", o)
	}
	if o := ToolOutcome(ask, nil, Legacy); o.Err == nil {
		t.Errorf("an input round in a 2025 task: %+v, want a failure", o)
	}
}

func TestMcpNameMustRepeatTheTaskID(t *testing.T) {
	params := json.RawMessage(`{"taskId":"abc"}`)
	header := func(v string) func(string) string { return func(string) string { return v } }
	if err := CheckNameHeader(header("abc"), MethodGet, params); err != nil {
		t.Errorf("a matching name: %v", err)
	}
	if err := CheckNameHeader(header("=?base64?YWJj?="), MethodCancel, params); err != nil {
		t.Errorf("a base64 name: %v", err)
	}
	for _, v := range []string{"", "abd"} {
		var mismatch mcp.HeaderMismatchError
		if err := CheckNameHeader(header(v), MethodUpdate, params); !errors.As(err, &mismatch) {
			t.Errorf("Mcp-Name %q: %v, want a header mismatch", v, err)
		}
	}
	if err := CheckNameHeader(header(""), "tools/list", nil); err != nil {
		t.Errorf("another method: %v", err)
	}
}

func TestAStatusPushCarriesTheTaskPerForm(t *testing.T) {
	r := sample(Completed)
	r.Form = Extension
	m, p := StatusNotification(r)
	if m != NotificationStatus || p["taskId"] != "abc" || p["status"] != "completed" || p["result"] == nil || p["resultType"] != nil {
		t.Errorf("2026 push %s %v", m, p)
	}
	r.Form = Legacy
	if m, p := StatusNotification(r); m != LegacyNotificationStatus || p["taskId"] != "abc" || p["result"] != nil {
		t.Errorf("2025 push %s %v", m, p)
	}
}
