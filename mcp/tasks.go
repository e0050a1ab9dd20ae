package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/mcp/task"
)

// Tasks: mcp/task has the rules, the shapes and the service; here a
// tools/call becomes a task, tasks/* are served, and a handler running as
// a task gets its way back to the client.

// marked is t as the policy marks it for c: its task mark (Guard.TaskSupport)
// overrides the tool's own execution.taskSupport.
func (s *Server) marked(c authz.Context, t mcp.Tool) mcp.Tool {
	if m := s.cfg.Guard.TaskSupport(c, t.Name); m != "" {
		t.Execution = &mcp.ToolExecution{TaskSupport: mcp.TaskSupport(m)}
	}
	return t
}

// callAsTask runs a tools/call as a task when its era and tool say so
// (task.Decide); ok false leaves the call to the synchronous path.
func (s *Server) callAsTask(ctx context.Context, x *exchange, tool Tool, req mcp.CallToolRequest) (res any, e *rpcError, ok bool) {
	if s.tasks == nil {
		return nil, nil, false
	}
	marked := s.marked(x.c, tool.Tool)
	run, spec, refuse := task.Decide(&marked, x.modern, declaresTasks(x), req.Params.Task)
	if refuse != nil || !run {
		return nil, taskRPCError(nil, refuse), refuse != nil
	}
	spec.Principal, spec.Tool, spec.Conn = x.c.Principal.Subject, req.Params.Name, x.conn
	var (
		last    *mcp.CallToolResult
		lastErr error
		base    = *x // the handler outlives the request: it reads a copy
	)
	st, err := s.tasks.Start(ctx, spec, func(tctx context.Context, round task.Round) task.Outcome {
		r := req
		if round.Responses != nil {
			_ = json.Unmarshal(round.Responses, &r.Params.InputResponses)
			r.Params.RequestState = round.State
		}
		tx := base
		tx.out = taskOutbox{s: s, ctx: tctx, legacy: !base.modern}
		last, lastErr = recovered(withExchange(tctx, &tx), tool.Handler, r)
		var fail *task.Error
		if lastErr != nil {
			he := handlerError(&base, lastErr)
			fail = &task.Error{Code: he.Code, Message: he.Message}
		}
		return task.ToolOutcome(last, fail, spec.Form)
	})
	switch {
	case errors.Is(err, task.ErrTooMany), errors.Is(err, task.ErrNoPrincipal):
		return nil, &rpcError{Code: codeInvalidRequest, Message: err.Error()}, true
	case err != nil:
		return nil, &rpcError{Code: codeInternal, Message: err.Error()}, true
	case st.Outcome != nil && lastErr != nil: // answered directly, within the grace
		return nil, handlerError(x, lastErr), true
	case st.Outcome != nil:
		return last, nil, true
	case x.modern:
		return task.Created(st.Task), nil, true
	}
	return task.LegacyCreated(st.Task), nil, true
}

// serveTasks serves tasks/get, tasks/update, tasks/cancel, tasks/result and
// tasks/list as the caller's principal.
func (s *Server) serveTasks(ctx context.Context, x *exchange) (any, *rpcError) {
	if s.tasks == nil {
		return nil, &rpcError{Code: codeMethodNotFound, Message: "this node serves no tasks"}
	}
	res, e := s.tasks.Serve(ctx, x.c.Principal.Subject, x.env.Method, x.env.Params, x.modern)
	return res, taskRPCError(nil, e)
}

// taskRPCError is e as the front's error answer to request id (nil for nil).
func taskRPCError(id json.RawMessage, e *task.Error) *rpcError {
	if e == nil {
		return nil
	}
	out := &rpcError{ID: id, Code: e.Code, Message: e.Message}
	if len(e.Data) > 0 {
		out.Data = e.Data
	}
	return out
}

// pushTask tells a task's principal its new state: a 2026-07-28 task on
// the principal's listen streams here, a 2025-11-25 one on its creating
// connection when this node notifies it.
func (s *Server) pushTask(r task.Record) {
	method, params := task.StatusNotification(r)
	for _, c := range s.conns.match(method, "", principalOnly(r.Principal)) {
		if c.listen != nil && r.Form == task.Extension || c.listen == nil && r.Form == task.Legacy && c.id == r.Conn {
			s.notify(c, method, params)
		}
	}
}

// declaresTasks reports whether a 2026-07-28 request's client declared the
// tasks extension in its _meta.
func declaresTasks(x *exchange) bool {
	_, ok := x.client.Capabilities.Extensions[task.ExtensionName]
	return ok
}

// taskOutbox is the way back to the client of a handler running as a
// task: its request's stream is closed, so an ask parks the task as
// input_required (answered by tasks/update), a progress message becomes
// the task's status message, and other notifications are dropped.
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
