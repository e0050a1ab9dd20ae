package authz

import (
	"slices"
	"strings"
)

// Transport names the MCP transport a request arrived on. It is declared by
// the server, never by the client.
type Transport string

// The transports an mcpswarm node serves.
const (
	TransportStdio          Transport = "stdio"
	TransportSSE            Transport = "sse"
	TransportStreamableHTTP Transport = "streamable-http"
)

// Valid reports whether t is one of the known transports.
func (t Transport) Valid() bool {
	switch t {
	case TransportStdio, TransportSSE, TransportStreamableHTTP:
		return true
	}
	return false
}

// Network reports whether t is a network transport (SSE or Streamable HTTP).
func (t Transport) Network() bool {
	return t == TransportSSE || t == TransportStreamableHTTP
}

// RoleAdmin is the role that lets a principal act on, and see, every session.
const RoleAdmin = "admin"

// The subjects of unauthenticated principals. Token subjects may not use them,
// so a token can never impersonate a connection or the stdio client.
const (
	StdioSubject      = "stdio"
	ConnSubjectPrefix = "conn:"
)

// Principal is who a request acts for: the verified subject of a bearer token
// or, without authentication, the connection itself.
type Principal struct {
	// Subject identifies the principal; sessions are owned by subject.
	Subject string
	// Roles come from the token and from the policy's roles section.
	Roles []string
	// Authenticated is true only when Subject was verified from a token.
	Authenticated bool
}

// HasRole reports whether p holds role.
func (p Principal) HasRole(role string) bool {
	return slices.Contains(p.Roles, role)
}

// IsAdmin reports whether p holds the admin role.
func (p Principal) IsAdmin() bool { return p.HasRole(RoleAdmin) }

// String returns the subject, for logs.
func (p Principal) String() string { return p.Subject }

// ConnPrincipal is the unauthenticated principal of the connection connID:
// subject "conn:<connID>".
func ConnPrincipal(connID string) Principal {
	return Principal{Subject: ConnSubjectPrefix + connID}
}

// StdioPrincipal is the principal of the single stdio client.
func StdioPrincipal() Principal {
	return Principal{Subject: StdioSubject}
}

// reservedSubject reports whether subject belongs to the unauthenticated
// namespace, which no token may claim.
func reservedSubject(subject string) bool {
	return subject == StdioSubject || strings.HasPrefix(subject, ConnSubjectPrefix)
}

// Context is everything a decision may depend on besides the tool and its
// arguments. Every field is derived by the server.
type Context struct {
	Principal Principal
	ConnID    string
	Transport Transport
	// Node is the name of the node deciding.
	Node string
}

// Owns reports whether p may act on a session owned by owner: p is the owner,
// or p holds the admin role. A principal with an empty subject owns nothing.
func Owns(p Principal, owner string) bool {
	if p.Subject == "" {
		return false
	}
	return p.Subject == owner || p.IsAdmin()
}

// CheckOwnership is Owns as a Decision, for callers that log and count
// decisions uniformly. The reason never names the owner.
func CheckOwnership(p Principal, session, owner string) Decision {
	switch {
	case p.Subject != "" && p.Subject == owner:
		return Allow("ownership:owner")
	case p.Subject != "" && p.IsAdmin():
		return Allow("ownership:admin")
	default:
		return Deny("session "+session+" belongs to another principal", "ownership")
	}
}

// mergeRoles returns a ∪ b in order of first appearance, reusing a when b
// adds nothing.
func mergeRoles(a, b []string) []string {
	out := a
	copied := false
	for _, r := range b {
		if slices.Contains(out, r) {
			continue
		}
		if !copied {
			out = slices.Clone(a)
			copied = true
		}
		out = append(out, r)
	}
	return out
}
