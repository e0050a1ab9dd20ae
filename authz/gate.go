package authz

import (
	"context"
	"errors"
)

// ErrRateLimited refuses a call past its principal's rate.
var ErrRateLimited = errors.New("rate limit reached for your principal; retry shortly")

// Gate is every check a tool call passes before it runs, in order: the
// principal's rate limit, the sensitive-tool guard, then the tool
// authorizer. Every surface that runs a tool (an MCP tools/call on any
// transport, an action in the web UI) asks it; each answers an Ask its own
// way (an elicitation, input_required, the person in the page).
//
// The result is the authorizer's decision, or, when the call was refused
// before the authorizer was asked, a Deny and the error that says why
// (ErrRateLimited, ErrSensitiveUnguarded).
func Gate(ctx context.Context, g *Guard, limit *RateLimiter, tool string, args map[string]any, c Context, sensitive bool) (Decision, error) {
	if limit != nil && !limit.Allow(c.Principal.Subject) {
		return Deny(ErrRateLimited.Error(), ""), ErrRateLimited
	}
	if err := CheckSensitive(g, sensitive); err != nil {
		return Deny(err.Error(), ""), err
	}
	var tools Authorizer
	if g != nil {
		tools = g.Tools
	}
	return SafeDecide(ctx, tools, tool, args, c), nil
}
