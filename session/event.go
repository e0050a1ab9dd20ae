package session

import (
	"encoding/json"
	"time"
)

// Info describes a running session.
type Info struct {
	ID        string    `json:"id"`
	App       string    `json:"app"`
	Principal string    `json:"principal"`
	Created   time.Time `json:"created"`
	// Status is "running".
	Status string `json:"status"`
	// Handoff counts the ordered transfers of the session between nodes:
	// the adopter of a handed-off session runs it with the sender's count
	// plus one, so its record supersedes the sender's on every node
	// without any tie-break.
	Handoff uint64 `json:"handoff,omitempty"`
}

// EventKind says what an Event reports.
type EventKind int

// Event kinds.
const (
	// ToolsChanged: the session's sticky tool set or a tool's definition changed.
	ToolsChanged EventKind = iota
	// ResourceChanged: the named resource of the session changed; for a
	// model/<key> projection Patch holds the RFC 6902 patch.
	ResourceChanged
	// Started: the session started (or was restored).
	Started
	// Stopped: the session stopped.
	Stopped
)

// String names the kind in snake case.
func (k EventKind) String() string {
	switch k {
	case ToolsChanged:
		return "tools_changed"
	case ResourceChanged:
		return "resource_changed"
	case Started:
		return "started"
	case Stopped:
		return "stopped"
	}
	return "unknown"
}

// Event is a change in a session, delivered to Manager subscribers.
type Event struct {
	Kind      EventKind
	Session   string
	Principal string
	// Resource is "widgets", "context" or "model/<key>" (ResourceChanged).
	Resource string
	// Patch computes the RFC 6902 JSON Patch from the resource's previous
	// content, on first call (ResourceChanged for model/<key>; nil for
	// widgets and context, which clients re-read). It is safe to call
	// from any goroutine, any number of times.
	Patch func() json.RawMessage
}
