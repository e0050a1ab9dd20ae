package mcp

import (
	"context"
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/mcp/seal"
)

// approveKey is the id of the approval input request (2026-07-28) and the
// property of the approval form.
const approveKey = "approve"

// gate runs the one gate of every tool call (authz.Gate: the rate limit,
// the sensitive-tool guard, the tool authorizer) and answers an Ask (an
// elicitation, or input_required on 2026-07-28). ok is false when the call
// must not run; res is then what the client gets.
func (s *Server) gate(ctx context.Context, req mcp.CallToolRequest, c authz.Context, tool string, args map[string]any, sensitive bool) (res *mcp.CallToolResult, ok bool) {
	d, err := authz.Gate(ctx, &s.cfg.Guard, s.cfg.RateLimiter, tool, args, c, sensitive)
	switch {
	case errors.Is(err, authz.ErrRateLimited):
		return toolError(err.Error(), map[string]any{"error": "rate_limited", "tool": tool}), false
	case err != nil:
		return toolError(fmt.Sprintf("%s: %v: no tool authorizer is configured", tool, err), map[string]any{"error": err.Error(), "tool": tool}), false
	case d.Kind == authz.KindAllow:
		return nil, true
	case d.Kind == authz.KindDeny:
		return deniedResult(tool, d), false
	}
	// Ask.
	if isModern(ctx) {
		return s.askModern(ctx, req, c, tool, args, d)
	}
	if !s.canElicit(ctx) {
		return deniedResult(tool, d), false
	}
	o := s.elicit(ctx, c, tool, d.Prompt)
	s.metrics.elicitation(o)
	if o == outcomeApproved {
		return nil, true
	}
	s.log.Info("tool call not approved", "tool", tool, "principal", c.Principal.Subject, "outcome", o.String())
	return deniedResult(tool, authz.Deny(o.String(), d.Rule)), false
}

func deniedResult(tool string, d authz.Decision) *mcp.CallToolResult {
	data := authz.AuthorizationRequired(tool, d)
	msg := fmt.Sprintf("%s: not authorized (%s): %s", tool, d.Kind, d.Detail())
	if d.Kind == authz.KindAsk {
		msg = fmt.Sprintf("%s needs approval this client cannot give (no elicitation support): %s", tool, d.Detail())
	}
	return toolError(msg, data)
}

// canElicit reports whether the calling client can be sent
// elicitation/create: it declared the capability.
func (s *Server) canElicit(ctx context.Context) bool {
	x := exchangeFrom(ctx)
	return x != nil && x.out != nil && x.client.Capabilities.Elicitation != nil
}

func approvalParams(tool, prompt string) mcp.ElicitationParams {
	if prompt == "" {
		prompt = "Allow the call to " + tool + "?"
	}
	return mcp.ElicitationParams{
		Message: prompt,
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				approveKey: map[string]any{"type": "boolean", "title": "Approve", "description": "Run " + tool},
			},
			"required": []string{approveKey},
		},
	}
}

// approved reports whether an elicitation answer is an explicit approval.
func approved(r *mcp.ElicitationResult) bool {
	if r == nil || r.Action != mcp.ElicitationResponseActionAccept {
		return false
	}
	m, ok := r.Content.(map[string]any)
	if !ok {
		return false
	}
	v, ok := m[approveKey].(bool)
	return ok && v
}

// askModern handles an Ask for a 2026-07-28 request with the multi round
// trip pattern: the first call answers input_required with a sealed
// requestState; the retry carries the answer and the state, which must
// match principal, tool and arguments, be unexpired and unused.
func (s *Server) askModern(ctx context.Context, req mcp.CallToolRequest, c authz.Context, tool string, args map[string]any, d authz.Decision) (*mcp.CallToolResult, bool) {
	if x := exchangeFrom(ctx); x == nil || x.client.Capabilities.Elicitation == nil {
		return deniedResult(tool, d), false
	}
	state := req.Params.RequestState
	if state == "" {
		s.metrics.elicitation(outcomePending)
		tok := s.states.Seal(c.Principal.Subject, tool, args)
		return &mcp.CallToolResult{Result: mcp.Result{ResultType: mcp.ResultTypeInputRequired},
			MultiRoundTripResult: mcp.MultiRoundTripResult{RequestState: tok, InputRequests: mcp.InputRequests{
				approveKey: mcp.NewElicitationInputRequest(approvalParams(tool, d.Prompt)),
			}}}, false
	}
	if err := s.states.Open(ctx, state, c.Principal.Subject, tool, args); err != nil {
		s.log.Warn("request state refused", "tool", tool, "principal", c.Principal.Subject, "err", err)
		code := "invalid_request_state"
		switch {
		case errors.Is(err, seal.ErrStateReplayed):
			code = "request_state_replayed"
		case errors.Is(err, seal.ErrStateExpired):
			code = "request_state_expired"
		}
		return toolError(fmt.Sprintf("%s: request state refused: %v", tool, err), map[string]any{"error": code, "tool": tool}), false
	}
	if approved(elicitationAnswer(req.Params.InputResponses, approveKey)) {
		s.metrics.elicitation(outcomeApproved)
		return nil, true
	}
	s.metrics.elicitation(outcomeDeclined)
	return deniedResult(tool, authz.Deny(outcomeDeclined.String(), d.Rule)), false
}

// elicitationAnswer is the elicitation answer under key in a retried
// 2026-07-28 request, or nil.
func elicitationAnswer(responses mcp.InputResponses, key string) *mcp.ElicitationResult {
	r, ok := responses[key]
	if !ok {
		return nil
	}
	if r.Elicitation == nil && r.DecodeFor(mcp.MethodElicitationCreate) != nil {
		return nil
	}
	return r.Elicitation
}
