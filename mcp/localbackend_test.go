package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/session"
)

// LocalBackend is a Backend over one node's session.Manager: every session
// is local and available, and the node is the only member.
type LocalBackend struct {
	node    string
	version string
	m       *session.Manager
}

// NewLocalBackend returns a Backend serving m's sessions as node.
func NewLocalBackend(node string, m *session.Manager) *LocalBackend {
	return &LocalBackend{node: node, version: "dev", m: m}
}

func (b *LocalBackend) info(i session.Info) SessionInfo {
	return SessionInfo{Info: i, Owner: b.node, Available: true}
}

// owned returns session id when p owns it; another's session reads as not
// running, so its existence does not leak.
func (b *LocalBackend) owned(p authz.Principal, id string) (session.Info, error) {
	i, ok := b.m.Get(id)
	if !ok || !authz.Owns(p, i.Principal) {
		return session.Info{}, fmt.Errorf("session %s: %w", session.Sanitize(id), session.ErrNotRunning)
	}
	return i, nil
}

// Apps lists the startable apps.
func (b *LocalBackend) Apps() []session.AppInfo { return b.m.Startable() }

// Start starts app as id for c.Principal.
func (b *LocalBackend) Start(ctx context.Context, c authz.Context, app, id string) (SessionInfo, error) {
	i, err := b.m.Start(ctx, id, app, c.Principal.Subject)
	if err != nil {
		return SessionInfo{}, err
	}
	return b.info(i), nil
}

// Stop stops id if c.Principal owns it.
func (b *LocalBackend) Stop(ctx context.Context, c authz.Context, id string) error {
	if _, err := b.owned(c.Principal, id); err != nil {
		return err
	}
	return b.m.Stop(ctx, id)
}

// Sessions lists the sessions p owns (all for an admin), sorted by id.
func (b *LocalBackend) Sessions(p authz.Principal) []SessionInfo {
	var out []SessionInfo
	for _, i := range b.m.List() {
		if authz.Owns(p, i.Principal) {
			out = append(out, b.info(i))
		}
	}
	slices.SortFunc(out, func(a, b SessionInfo) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Lookup finds a session by id.
func (b *LocalBackend) Lookup(id string) (SessionInfo, bool) {
	i, ok := b.m.Get(id)
	if !ok {
		return SessionInfo{}, false
	}
	return b.info(i), true
}

// Tools lists the derived tools of p's sessions.
func (b *LocalBackend) Tools(p authz.Principal) []session.Tool {
	var out []session.Tool
	for _, i := range b.m.List() {
		if !authz.Owns(p, i.Principal) {
			continue
		}
		ts, err := b.m.Tools(i.ID)
		if err != nil {
			continue
		}
		out = append(out, ts...)
	}
	return out
}

// Call runs a derived tool of a session c.Principal owns.
func (b *LocalBackend) Call(ctx context.Context, c authz.Context, sessionID, tool string, args map[string]any) (session.Result, error) {
	if _, err := b.owned(c.Principal, sessionID); err != nil {
		return session.Result{}, err
	}
	return b.m.Call(ctx, sessionID, tool, args)
}

// ReadResource reads a session resource.
func (b *LocalBackend) ReadResource(_ context.Context, c authz.Context, sessionID, name string) (json.RawMessage, error) {
	if _, err := b.owned(c.Principal, sessionID); err != nil {
		return nil, err
	}
	return b.m.ReadResource(sessionID, name)
}

// CountSessions implements Backend: the sessions principal owns on this
// node.
func (b *LocalBackend) CountSessions(principal string) int {
	n := 0
	for _, info := range b.m.List() {
		if info.Principal == principal {
			n++
		}
	}
	return n
}

// ResourceNames names a session's resources.
func (b *LocalBackend) ResourceNames(sessionID string) ([]string, error) {
	return b.m.ResourceNames(sessionID)
}

// Model returns a session's model.
func (b *LocalBackend) Model(_ context.Context, c authz.Context, id string) (json.RawMessage, error) {
	if _, err := b.owned(c.Principal, id); err != nil {
		return nil, err
	}
	return b.m.Model(id)
}

// Screenshot renders a session's view.
func (b *LocalBackend) Screenshot(_ context.Context, c authz.Context, id string) (string, error) {
	if _, err := b.owned(c.Principal, id); err != nil {
		return "", err
	}
	return b.m.Screenshot(id, session.ScreenWidth, session.ScreenHeight)
}

// SendKey delivers a key press.
func (b *LocalBackend) SendKey(ctx context.Context, c authz.Context, id string, k session.Key) (session.Result, error) {
	if _, err := b.owned(c.Principal, id); err != nil {
		return session.Result{}, err
	}
	return b.m.SendKey(ctx, id, k)
}

// Members reports this node alone.
func (b *LocalBackend) Members() []Member {
	return []Member{{Name: b.node, State: "alive", Version: b.version, Self: true}}
}

// Watch forwards the manager's events.
func (b *LocalBackend) Watch(fn func(Event)) (cancel func()) {
	return b.m.Subscribe(func(e session.Event) {
		switch e.Kind {
		case session.ToolsChanged:
			fn(Event{Kind: ToolsChanged, Principal: e.Principal, Session: e.Session})
		case session.ResourceChanged:
			fn(Event{Kind: ResourceChanged, Principal: e.Principal, Session: e.Session, Resource: e.Resource, Patch: e.Patch})
		case session.Started:
			fn(Event{Kind: SessionsChanged, Principal: e.Principal, Session: e.Session})
		case session.Stopped:
			fn(Event{Kind: SessionsChanged, Principal: e.Principal, Session: e.Session})
			fn(Event{Kind: ToolsChanged, Principal: e.Principal, Session: e.Session})
		}
	})
}

var _ Backend = (*LocalBackend)(nil)

// LoneCluster returns the test double of a one-node cluster, for the
// package's external tests (which cannot reach testCluster).
func LoneCluster() Cluster { return &testCluster{} }
