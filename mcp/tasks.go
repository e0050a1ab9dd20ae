package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/mcp/task"
)

// Tasks (mcp/task has the rules and the service): which tools/call becomes
// a task, the tasks/* methods, and the way back to the client of a
// handler that runs as a task.

// taskGrace is how long a 2026-07-28 tools/call of a task-supporting tool
// waits for its handler before it answers with a task instead.
const taskGrace = 100 * time.Millisecond

// callAsTask runs a tools/call as a task when its era and tool say so; ok
// false leaves the call to the synchronous path.
func (s *Server) callAsTask(ctx context.Context, x *exchange, tool Tool, req mcp.CallToolRequest) (res any, e *rpcError, ok bool) {
	support := mcp.TaskSupportForbidden
	if ex := tool.Tool.Execution; ex != nil && ex.TaskSupport != "" {
		support = ex.TaskSupport
	}
	spec := task.Spec{Principal: x.c.Principal.Subject, Tool: req.Params.Name, Form: task.Extension}
	switch {
	case s.tasks == nil || support == mcp.TaskSupportForbidden && (x.modern || req.Params.Task == nil):
		return nil, nil, false
	case x.modern && !declaresTasks(x):
		if support == mcp.TaskSupportRequired {
			return nil, missingTasksError(nil, fmt.Sprintf("tool %q runs only as a task", req.Params.Name)), true
		}
		return nil, nil, false
	case x.modern:
		spec.Grace = taskGrace
		spec.Sync = func(o task.Outcome) bool { return o.Input != nil || support == mcp.TaskSupportOptional }
	case req.Params.Task == nil && support == mcp.TaskSupportRequired:
		return nil, &rpcError{Code: codeMethodNotFound, Message: fmt.Sprintf("tool '%s' requires task augmentation", req.Params.Name)}, true
	case req.Params.Task == nil:
		return nil, nil, false
	case support == mcp.TaskSupportForbidden:
		return nil, &rpcError{Code: codeMethodNotFound, Message: fmt.Sprintf("tool '%s' does not support task augmentation", req.Params.Name)}, true
	default:
		spec.Form, spec.Conn = task.Legacy, x.conn
		if ttl := req.Params.Task.TTL; ttl != nil {
			spec.TTL = time.Duration(*ttl) * time.Millisecond
		}
	}
	var (
		last    *mcp.CallToolResult
		lastErr error
	)
	run := func(tctx context.Context, round task.Round) task.Outcome {
		r := req
		if round.Responses != nil {
			_ = json.Unmarshal(round.Responses, &r.Params.InputResponses)
			r.Params.RequestState = round.State
		}
		tx := *x
		tx.out = taskOutbox{s: s, ctx: tctx, legacy: !x.modern}
		last, lastErr = recovered(withExchange(tctx, &tx), tool.Handler, r)
		return s.taskOutcome(x, last, lastErr)
	}
	st, err := s.tasks.Start(ctx, spec, run)
	switch {
	case errors.Is(err, task.ErrTooMany):
		return nil, &rpcError{Code: codeInvalidRequest, Message: err.Error()}, true
	case err != nil:
		return nil, &rpcError{Code: codeInternal, Message: err.Error()}, true
	case st.Outcome != nil && lastErr != nil:
		return nil, handlerError(x, lastErr), true
	case st.Outcome != nil:
		return last, nil, true
	case x.modern:
		return task.Created(st.Task), nil, true
	}
	return task.LegacyCreated(st.Task), nil, true
}

// taskOutcome is a handler's answer as a task's outcome.
func (s *Server) taskOutcome(x *exchange, res *mcp.CallToolResult, err error) task.Outcome {
	switch {
	case err != nil:
		e := handlerError(x, err)
		return task.Outcome{Err: &task.Error{Code: e.Code, Message: e.Message}}
	case res == nil:
		return task.Outcome{Err: &task.Error{Code: codeInternal, Message: "the tool handler returned no result"}}
	case res.NeedsInput() && !x.modern:
		return task.Outcome{Err: &task.Error{Code: codeInternal, Message: "the tool needs input, which a 2025-11-25 task cannot ask its client for"}}
	case res.NeedsInput():
		input, _ := json.Marshal(res.InputRequests)
		return task.Outcome{Input: input, State: res.RequestState}
	}
	if x.modern {
		s.decorate(res, string(mcp.MethodToolsCall))
	}
	b, err := json.Marshal(res)
	if err != nil {
		return task.Outcome{Err: &task.Error{Code: codeInternal, Message: "encoding the result: " + err.Error()}}
	}
	return task.Outcome{Result: b, IsError: res.IsError}
}

// serveTasks serves tasks/get, tasks/update, tasks/cancel, tasks/result and
// tasks/list as the caller's principal.
func (s *Server) serveTasks(ctx context.Context, x *exchange) (any, *rpcError) {
	if s.tasks == nil {
		return nil, &rpcError{Code: codeMethodNotFound, Message: "this node serves no tasks"}
	}
	res, e := s.tasks.Serve(ctx, x.c.Principal.Subject, x.env.Method, x.env.Params, x.modern)
	if e != nil {
		return nil, &rpcError{Code: e.Code, Message: e.Message, Data: e.Data}
	}
	return res, nil
}

// declaresTasks reports whether a 2026-07-28 request's client declared the
// tasks extension in its _meta.
func declaresTasks(x *exchange) bool {
	_, ok := x.client.Capabilities.Extensions[task.ExtensionName]
	return ok
}

// missingTasksError is -32021 naming the tasks extension.
func missingTasksError(id json.RawMessage, why string) *rpcError {
	return &rpcError{ID: id, Code: mcp.MISSING_REQUIRED_CLIENT_CAPABILITY,
		Message: why + ": the request's _meta " + mcp.MetaKeyClientCapabilities + " does not declare the extension " + task.ExtensionName,
		Data:    map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{task.ExtensionName: map[string]any{}}}}}
}

// taskOutbox is the way back to the client of a handler running as a
// task: its request's stream is closed, so an ask parks the task as
// input_required (answered by tasks/update) and a progress message
// becomes the task's status message; other notifications are dropped.
type taskOutbox struct {
	s      *Server
	ctx    context.Context
	legacy bool
}

func (o taskOutbox) notify(n mcp.JSONRPCNotification) error {
	if msg, ok := n.Params.AdditionalFields["message"].(string); ok && n.Method == string(mcp.MethodNotificationProgress) {
		o.s.tasks.Progress(o.ctx, msg)
	}
	return nil
}

func (o taskOutbox) ask(ctx context.Context, method string, params any) (json.RawMessage, error) {
	if o.legacy {
		return nil, fmt.Errorf("asking the client %s: a 2025-11-25 task cannot ask its client for input", method)
	}
	return o.s.tasks.Ask(ctx, method, params)
}
