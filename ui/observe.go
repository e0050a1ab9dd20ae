package ui

import (
	"context"
	"time"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/mcp"
	"github.com/mcpswarm/mcpswarm/session"
)

// Observed wraps the backend the MCP front serves from, journaling every
// derived tool call and key press an agent makes, so the session page's
// event log shows them. Everything else passes through unchanged.
func Observed(b mcp.Backend, j *Journal) mcp.Backend {
	return observed{Backend: b, j: j}
}

type observed struct {
	mcp.Backend
	j *Journal
}

// Call implements mcp.Backend.
func (o observed) Call(ctx context.Context, c authz.Context, id, tool string, args map[string]any) (session.Result, error) {
	res, err := o.Backend.Call(ctx, c, id, tool, args)
	o.j.Record(actionOf(SourceAgent, c, id, tool, res, err))
	return res, err
}

// SendKey implements mcp.Backend.
func (o observed) SendKey(ctx context.Context, c authz.Context, id string, k session.Key) (session.Result, error) {
	res, err := o.Backend.SendKey(ctx, c, id, k)
	o.j.Record(actionOf(SourceAgent, c, id, "swarm_send_key("+keyName(k)+")", res, err))
	return res, err
}

func actionOf(src Source, c authz.Context, id, tool string, res session.Result, err error) Action {
	a := Action{Session: id, Tool: tool, Source: src, Principal: c.Principal.Subject, At: time.Now().UTC()}
	switch {
	case err != nil:
		a.Error = err.Error()
	case res.IsError:
		a.Error = res.Text
	}
	if r := []rune(a.Error); len(r) > 200 {
		a.Error = string(r[:200]) + "…"
	}
	return a
}

func keyName(k session.Key) string {
	s := k.Key
	if k.Shift {
		s = "shift+" + s
	}
	if k.Alt {
		s = "alt+" + s
	}
	if k.Ctrl {
		s = "ctrl+" + s
	}
	return s
}

var _ mcp.Backend = observed{}
