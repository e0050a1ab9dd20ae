package mcpswarm

import (
	"errors"
	"time"
)

// HTTPLimits bounds what clients can hold of the HTTP listener. Each limit
// answers an attack that needs no credential: connections that never send
// their headers or body, keep-alive connections left open, and floods of
// connections that would exhaust the node's file descriptors (and with
// them gossip and gRPC, which share the process's descriptor table).
type HTTPLimits struct {
	// HeaderTimeout bounds reading a request's headers.
	HeaderTimeout time.Duration
	// BodyTimeout bounds reading a request's body, from the moment its
	// headers are read. Responses (SSE streams included) are not bounded.
	BodyTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle for this long.
	IdleTimeout time.Duration
	// ConnsPerSource caps the open connections from one client IP; a new
	// one beyond it is closed at once. Zero disables the cap (use it, or a
	// larger value, behind a proxy that funnels every client through one
	// address).
	ConnsPerSource int
	// MaxConns caps the open HTTP connections in all; a new one beyond it
	// is closed at once. Zero derives it from the process's file-descriptor
	// limit, keeping headroom for gossip, gRPC and storage (see fdBudget).
	MaxConns int
}

// DefaultHTTPLimits returns the defaults documented on each flag.
func DefaultHTTPLimits() HTTPLimits {
	return HTTPLimits{
		HeaderTimeout:  10 * time.Second,
		BodyTimeout:    30 * time.Second,
		IdleTimeout:    120 * time.Second,
		ConnsPerSource: 256,
	}
}

func (l HTTPLimits) validate() error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"http-header-timeout", l.HeaderTimeout}, {"http-body-timeout", l.BodyTimeout}, {"http-idle-timeout", l.IdleTimeout}} {
		if d.v <= 0 {
			return &FieldError{Flag: d.flag, Err: errors.New("must be positive: without it a client that never finishes holds its connection forever")}
		}
	}
	if l.ConnsPerSource < 0 {
		return fieldErr("http-conns-per-source", "must not be negative, got %d", l.ConnsPerSource)
	}
	if l.MaxConns < 0 {
		return fieldErr("http-max-conns", "must not be negative, got %d", l.MaxConns)
	}
	return nil
}
