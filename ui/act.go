package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/session"
)

// maxActBody bounds an action request: a widget id, an action name and the
// arguments a person can type.
const maxActBody = 64 << 10

// actTimeout bounds a page action when the owner does not answer (the
// owner itself bounds an update to 5 s).
const actTimeout = 10 * time.Second

// actRequest is what the page posts for a click or typing.
type actRequest struct {
	Widget string         `json:"widget"`
	Action string         `json:"action"`
	Args   map[string]any `json:"args"`
	// Approve answers an Ask: the person in the page approved this call.
	Approve bool `json:"approve"`
}

// actResponse is the answer: the tool's result, or an Ask the page must put
// to the person, or a refusal.
type actResponse struct {
	Tool    string `json:"tool"`
	OK      bool   `json:"ok"`
	Text    string `json:"text,omitempty"`
	Ask     string `json:"ask,omitempty"`
	Error   string `json:"error,omitempty"`
	Refusal string `json:"refusal,omitempty"`
}

// serveAct runs a page action through the checks a tools/call passes: the
// caller must own the session, then the one gate (authz.Gate: rate limit,
// sensitive-tool guard, tool authorizer); then the swarm routes it to the
// owner node, which re-checks ownership.
func (h *Handler) serveAct(w http.ResponseWriter, r *http.Request) {
	p := whoFrom(r.Context()).principal
	id := r.PathValue("id")
	var req actRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxActBody))
	if err := dec.Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, actResponse{Error: "the action is not a JSON object of at most 64 KiB: " + err.Error()})
		return
	}
	if !session.ValidID(req.Widget) || !session.ValidID(req.Action) {
		writeJSON(w, http.StatusBadRequest, actResponse{Error: "widget and action must be ids ([A-Za-z0-9_-], 1 to 32 characters)"})
		return
	}
	tool := id + "." + req.Widget + "." + req.Action
	resp := actResponse{Tool: tool}
	meta, err := h.visible(r, p, id)
	if err != nil {
		resp.Refusal = err.Error()
		writeJSON(w, http.StatusForbidden, resp)
		return
	}
	if !meta.Available {
		resp.Refusal = "owner unavailable: node " + meta.Node
		writeJSON(w, http.StatusServiceUnavailable, resp)
		return
	}
	def, ok := h.toolOf(p, id, tool)
	if !ok {
		resp.Refusal = fmt.Sprintf("session %s has no tool %s (the widget may have left the view)", id, tool)
		writeJSON(w, http.StatusConflict, resp)
		return
	}
	c := h.authzContext(p)
	d, err := authz.Gate(r.Context(), &h.cfg.Guard, h.cfg.RateLimiter, tool, req.Args, c, def.Sensitive || def.Destructive)
	switch {
	case errors.Is(err, authz.ErrRateLimited):
		resp.Refusal = err.Error()
		writeJSON(w, http.StatusTooManyRequests, resp)
		return
	case err != nil:
		resp.Refusal = fmt.Sprintf("%s: %v: no tool authorizer is configured", tool, err)
		writeJSON(w, http.StatusForbidden, resp)
		return
	}
	switch {
	case d.Kind == authz.KindDeny:
		h.log.Info("UI action denied", "tool", tool, "principal", p.Subject, "rule", d.Rule)
		resp.Refusal = "not authorized: " + d.Detail()
		writeJSON(w, http.StatusForbidden, resp)
		return
	case d.Kind == authz.KindAsk && !req.Approve:
		// The person in the page is the one to ask: the page shows the
		// prompt and posts the same action again with approve set.
		resp.Ask = d.Prompt
		if resp.Ask == "" {
			resp.Ask = "Allow the call to " + tool + "?"
		}
		writeJSON(w, http.StatusOK, resp)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), actTimeout)
	defer cancel()
	res, err := h.cfg.Backend.Call(ctx, c, id, tool, req.Args)
	h.cfg.Journal.Record(actionOf(SourcePage, c, id, tool, res, err))
	switch {
	case err != nil:
		resp.Error = err.Error()
		status := http.StatusBadGateway
		if errors.Is(err, session.ErrNotRunning) {
			status = http.StatusNotFound
		}
		writeJSON(w, status, resp)
	case res.IsError:
		resp.Error = res.Text
		writeJSON(w, http.StatusOK, resp)
	default:
		resp.OK, resp.Text = true, res.Text
		writeJSON(w, http.StatusOK, resp)
	}
}

// toolOf finds the derived tool among p's tools (the sticky set the MCP
// front lists and calls from).
func (h *Handler) toolOf(p authz.Principal, id, name string) (session.Tool, bool) {
	for _, t := range h.cfg.Backend.Tools(p) {
		if t.Name == name && t.Session == id {
			return t, true
		}
	}
	return session.Tool{}, false
}
