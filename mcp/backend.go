package mcp

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/session"
)

// Backend is the view of sessions, tools and members the MCP front serves
// from, and where calls go. The swarm layer implements it over replicated
// registries and forwarding (a lone node is a one-node swarm).
type Backend interface {
	// Apps lists the startable apps.
	Apps() []session.AppInfo
	// Start starts app as session id ("" → generated) owned by c.Principal.
	Start(ctx context.Context, c authz.Context, app, id string) (SessionInfo, error)
	// Stop stops session id.
	Stop(ctx context.Context, c authz.Context, id string) error
	// Sessions lists the sessions visible to p: owned, or all for an admin.
	Sessions(p authz.Principal) []SessionInfo
	// Lookup finds a session by id, whoever owns it.
	Lookup(id string) (SessionInfo, bool)
	// CountSessions returns how many sessions principal owns (the session
	// cap asks it on every start, so it should not build a listing).
	CountSessions(principal string) int
	// Tools lists the derived tools of p's visible, available sessions.
	Tools(p authz.Principal) []session.Tool
	// Call runs a derived tool; ctx carries session.WithProgress.
	Call(ctx context.Context, c authz.Context, sessionID, tool string, args map[string]any) (session.Result, error)
	// ReadResource reads a session resource ("widgets", "context", "model/<key>").
	ReadResource(ctx context.Context, c authz.Context, sessionID, name string) (json.RawMessage, error)
	// ResourceNames names a session's resources, so resources/list and
	// completion can offer its model projections (model/<key>) next to
	// widgets and context; a session it cannot name them for (remote, or
	// gone) is an error, and the front offers widgets and context alone.
	ResourceNames(sessionID string) ([]string, error)
	// Model returns a session's whole model.
	Model(ctx context.Context, c authz.Context, id string) (json.RawMessage, error)
	// Screenshot renders a session's view as text.
	Screenshot(ctx context.Context, c authz.Context, id string) (string, error)
	// SendKey delivers a key press to a session.
	SendKey(ctx context.Context, c authz.Context, id string, k session.Key) (session.Result, error)
	// Members lists the cluster members.
	Members() []Member
	// Watch calls fn for every change until cancel is called. fn must not block.
	Watch(fn func(Event)) (cancel func())
}

// SessionInfo is a session as the front sees it.
type SessionInfo struct {
	session.Info
	// Owner is the name of the node that runs the session.
	Owner string
	// Available is false while the owner node is unreachable.
	Available bool
	// Standbys are the nodes holding the owner's newest snapshot, which
	// take the session over if the owner dies (Info.Handoff is its
	// ownership epoch).
	Standbys []string
	// Behind names the placed standbys that miss the newest snapshot,
	// with since when: until they catch up, writes are answered on the
	// owner's own durability.
	Behind map[string]time.Time
}

// Member is one cluster member.
type Member struct {
	Name, State, GRPCAddr, Version string
	Self                           bool
}

// EventKind names what an Event reports.
type EventKind int

// Event kinds.
const (
	// ToolsChanged: Principal's derived tool set changed.
	ToolsChanged EventKind = iota + 1
	// ResourceChanged: resource Resource of Session changed (Patch computes
	// the RFC 6902 patch for a model projection, when known).
	ResourceChanged
	// MembersChanged: the member list changed.
	MembersChanged
	// SessionsChanged: a session started or stopped (Principal owns it).
	SessionsChanged
)

// Event is a change the front turns into notifications.
type Event struct {
	Kind      EventKind
	Principal string
	Session   string
	Resource  string
	// Patch, when not nil, computes the resource's JSON patch on demand:
	// only a notification to a subscriber needs it. Safe to call from any
	// goroutine, more than once.
	Patch func() json.RawMessage
}
