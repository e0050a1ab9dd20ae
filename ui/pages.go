package ui

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/mcpswarm/mcpswarm/authz"
)

// Page template names (files under assets/).
const (
	pageLogin   = "login.html"
	pageSwarm   = "swarm.html"
	pageSession = "session.html"
)

// pageData fills a page template. html/template escapes every field in its
// context; the front end reads Session and CSRF from data attributes.
type pageData struct {
	Title     string
	Node      string
	Principal string
	Admin     bool
	CSRF      string
	Session   string
	Error     string
	Next      string
	Dev       bool
}

func (h *Handler) page(w http.ResponseWriter, r *http.Request, name string, status int, d pageData) {
	d.Node, d.Dev = h.cfg.Node, h.cfg.Dev
	switch name {
	case pageLogin:
		d.Title = "Sign in"
	case pageSwarm:
		d.Title = "Swarm"
	case pageSession:
		d.Title = "Session " + d.Session
	}
	if name == pageLogin && d.Next == "" {
		d.Next = safeNext(r.URL.Query().Get("next"))
	}
	var b bytes.Buffer
	if err := h.pages.ExecuteTemplate(&b, name, d); err != nil {
		h.log.Error("rendering UI page", "page", name, "err", err)
		http.Error(w, "rendering the page failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

func (h *Handler) serveSwarmPage(w http.ResponseWriter, r *http.Request) {
	c := whoFrom(r.Context())
	h.page(w, r, pageSwarm, http.StatusOK, pageData{Principal: c.principal.Subject, Admin: c.principal.IsAdmin(), CSRF: h.csrfToken(c.credential)})
}

// serveSessionPage answers 403, with nothing about the session, unless the
// caller may see it: the same answer whether it is someone else's or does
// not exist, as the MCP tools answer.
func (h *Handler) serveSessionPage(w http.ResponseWriter, r *http.Request) {
	c := whoFrom(r.Context())
	id := r.PathValue("id")
	if _, err := h.visible(r, c.principal, id); err != nil {
		h.page(w, r, pageSession, http.StatusForbidden, pageData{Principal: c.principal.Subject, Error: err.Error()})
		return
	}
	h.page(w, r, pageSession, http.StatusOK, pageData{Principal: c.principal.Subject, Admin: c.principal.IsAdmin(), CSRF: h.csrfToken(c.credential), Session: id})
}

// forbidden is the one refusal for a session the caller may not see.
type forbidden struct{ msg string }

func (f forbidden) Error() string { return f.msg }

// visible checks that p may see session id: it is running and p owns it
// (or holds the admin role), and the read authorizer allows reading it.
func (h *Handler) visible(r *http.Request, p authz.Principal, id string) (sessionMeta, error) {
	info, ok := h.cfg.Backend.Lookup(id)
	if !ok || !authz.Owns(p, info.Principal) {
		return sessionMeta{}, forbidden{"No session of yours is running under this id."}
	}
	if d := h.allowedRead(r.Context(), p, "swarm://session/"+id+"/widgets"); d.Kind != authz.KindAllow {
		return sessionMeta{}, forbidden{"Reading this session is not allowed: " + d.Detail()}
	}
	return sessionMeta{ID: id, App: info.App, Owner: info.Principal, Node: info.Owner, Created: info.Created, Available: info.Available}, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
