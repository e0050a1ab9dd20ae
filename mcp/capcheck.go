package mcp

import (
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mcpswarm/mcpswarm/mcp/task"
	"github.com/mcpswarm/mcpswarm/mcp/wire"
)

// checkCapabilities refuses a modern tools/call of a tool whose
// wire.MetaRequiresCapabilities the request does not declare, and a task
// request or a tools/call of a tool that runs only as a task without the
// tasks extension; nil when it may run.
func (s *Server) checkCapabilities(x *exchange) *rpcError {
	env := x.env
	tool := s.serverTool(env)
	switch {
	case s.tasks != nil && task.NamesTask(env.Method) && !declaresTasks(x):
		return taskRPCError(env.ID, task.MissingExtension(env.Method+" needs the tasks extension"))
	case s.tasks != nil && tool != nil:
		marked := s.marked(x.c, *tool)
		if _, _, refuse := task.Decide(&marked, true, declaresTasks(x), nil); refuse != nil {
			return taskRPCError(env.ID, refuse)
		}
	case tool == nil:
		return nil
	}
	missing := wire.MissingCapabilities(env.Params, wire.RequiredCapabilities(tool))
	if len(missing) == 0 {
		return nil
	}
	data := map[string]any{}
	for _, c := range missing {
		data[c] = map[string]any{}
	}
	return &rpcError{ID: env.ID, Code: mcp.MISSING_REQUIRED_CLIENT_CAPABILITY,
		Message: fmt.Sprintf("tool %q needs the client capabilities %s, which this request's _meta %s does not declare",
			tool.Name, strings.Join(missing, ", "), mcp.MetaKeyClientCapabilities),
		Data: map[string]any{"requiredCapabilities": data}}
}

// serverTool is the static or extension tool a tools/call names, or nil
// (a session's tool, or no tools/call).
func (s *Server) serverTool(env wire.Envelope) *mcp.Tool {
	if env.Method != string(mcp.MethodToolsCall) {
		return nil
	}
	name, ok := wire.CallToolName(env.Params)
	if !ok || name == "" {
		return nil
	}
	if st, ok := s.static[name]; ok {
		return &st.Tool
	}
	if st, ok := s.ext.tool(name); ok {
		return &st.Tool
	}
	return nil
}
