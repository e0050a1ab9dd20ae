package mcp

import (
	"context"

	"github.com/mcpswarm/mcpswarm/authz"
)

// AnonymousSubject is the shared principal of anonymous 2026-07-28 clients
// in development mode.
const AnonymousSubject = "anonymous"

type identityKey struct{}

// identity is what the transport knows about a request before the
// dispatcher serves it: the transport and, when authentication is on, the
// verified principal.
type identity struct {
	transport authz.Transport
	principal authz.Principal // set when authenticated
	authed    bool
}

func withIdentity(ctx context.Context, id identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// identityFrom returns what the front's middleware learnt of the request
// in ctx (the zero identity without it).
func identityFrom(ctx context.Context) (identity, bool) {
	id, ok := ctx.Value(identityKey{}).(identity)
	return id, ok
}

// boundSubject is the principal a session id minted or validated for this
// request is bound to: the authenticated subject, or "".
func boundSubject(ctx context.Context) string {
	if id, ok := identityFrom(ctx); ok && id.authed {
		return id.principal.Subject
	}
	return ""
}

// isModern reports whether the request in ctx speaks 2026-07-28 or later.
func isModern(ctx context.Context) bool {
	x := exchangeFrom(ctx)
	return x != nil && x.modern
}

// authzContext is the authorization context of the request in ctx. The
// principal is never anything the client merely asserts: a verified token's
// subject, else the connection (conn:<id>), stdio, or for an anonymous
// 2026-07-28 request nobody (in Dev, the shared "anonymous").
func (s *Server) authzContext(ctx context.Context) authz.Context {
	if x := exchangeFrom(ctx); x != nil {
		return x.c
	}
	return authz.Context{Node: s.cfg.Node}
}

// principal is the one rule that names who a request acts for: a verified
// token's subject, else stdio, else the connection (conn:<id>), else — in
// Dev and where anonymous requests are possible at all (anonymousOK) — the
// shared anonymous principal; otherwise nobody.
func (s *Server) principal(id identity, connID string, anonymousOK bool) authz.Principal {
	switch {
	case id.authed:
		return id.principal
	case id.transport == authz.TransportStdio:
		return s.cfg.Guard.Principal(authz.StdioPrincipal())
	case connID != "":
		return s.cfg.Guard.Principal(authz.ConnPrincipal(connID))
	case anonymousOK && s.cfg.Dev:
		return s.cfg.Guard.Principal(authz.Principal{Subject: AnonymousSubject})
	}
	return authz.Principal{}
}

// canOwn reports why c may not own sessions ("" when it may).
func (s *Server) canOwn(ctx context.Context, c authz.Context) string {
	if c.Principal.Subject == "" {
		return "ownership needs authentication: this 2026-07-28 request carries no connection, so sessions can only be owned by an authenticated principal (send a bearer token)"
	}
	if c.Principal.Subject == AnonymousSubject && !c.Principal.Authenticated {
		s.log.Warn("anonymous 2026-07-28 client owns sessions under the shared principal (dev mode)", "principal", AnonymousSubject)
	}
	return ""
}
