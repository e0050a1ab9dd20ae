package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/session"
)

// Resource URIs.
const (
	URIMembers  = "swarm://cluster/members"
	URISessions = "swarm://cluster/sessions"
	URIMe       = "swarm://me"
	uriSession  = "swarm://session/"
	// MetaPatch is the _meta key of notifications/resources/updated that
	// carries the RFC 6902 patch of a model projection.
	MetaPatch = "mcpswarm/patch"
)

// SessionURI is the URI of resource name ("widgets", "context",
// "model/<key>") of session id.
func SessionURI(id, name string) string { return uriSession + id + "/" + name }

// parseSessionURI splits swarm://session/<id>/<name>.
func parseSessionURI(uri string) (id, name string, ok bool) {
	rest, found := strings.CutPrefix(uri, uriSession)
	if !found {
		return "", "", false
	}
	id, name, found = strings.Cut(rest, "/")
	if !found || !session.ValidID(id) || name == "" {
		return "", "", false
	}
	if name != "widgets" && name != "context" {
		key, isModel := strings.CutPrefix(name, "model/")
		if !isModel || key == "" || strings.Contains(key, "/") {
			return "", "", false
		}
	}
	return id, name, true
}

func jsonContents(uri string, v any) ([]mcp.ResourceContents, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", uri, err)
	}
	return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: "application/json", Text: string(b)}}, nil
}

func (s *Server) addResources() {
	s.ext.AddResource(mcp.NewResource(URIMembers, "cluster members",
		mcp.WithResourceDescription("The cluster's members and their state."), mcp.WithMIMEType("application/json")),
		func(_ context.Context, _ mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return jsonContents(URIMembers, s.toolMembers(context.Background(), authz.Context{}, mcp.CallToolRequest{}).StructuredContent)
		})
	s.ext.AddResource(mcp.NewResource(URISessions, "your sessions",
		mcp.WithResourceDescription("The sessions visible to you, with their owner nodes."), mcp.WithMIMEType("application/json")),
		func(ctx context.Context, _ mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			c := s.authzContext(ctx)
			return jsonContents(URISessions, s.toolList(ctx, c, mcp.CallToolRequest{}).StructuredContent)
		})
	s.ext.AddResource(mcp.NewResource(URIMe, "who am I",
		mcp.WithResourceDescription("Your principal, connection and owned sessions."), mcp.WithMIMEType("application/json")),
		func(ctx context.Context, _ mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			c := s.authzContext(ctx)
			owned := []string{}
			for _, i := range s.cfg.Backend.Sessions(c.Principal) {
				if i.Principal == c.Principal.Subject {
					owned = append(owned, i.ID)
				}
			}
			return jsonContents(URIMe, map[string]any{
				"principal": c.Principal.Subject, "authenticated": c.Principal.Authenticated, "roles": c.Principal.Roles,
				"connection": c.ConnID, "transport": string(c.Transport), "node": s.cfg.Node, "sessions": owned,
				"protocolVersion": requestVersion(ctx),
			})
		})
	for _, t := range []struct{ tmpl, name, desc string }{
		{uriSession + "{id}/widgets", "session widgets", "The widgets of one of your sessions, with their state (masked values omitted)."},
		{uriSession + "{id}/context", "session context", "The context tree of one of your sessions: view, focus and model projections."},
		{uriSession + "{id}/model/{key}", "session model projection", "A named projection of one of your sessions' model."},
	} {
		s.ext.AddResourceTemplate(mcp.NewResourceTemplate(t.tmpl, t.name,
			mcp.WithTemplateDescription(t.desc), mcp.WithTemplateMIMEType("application/json")), s.readSessionResource)
	}
}

// readSessionResource serves swarm://session/<id>/<name> to its owner.
func (s *Server) readSessionResource(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	uri := req.Params.URI
	id, name, ok := parseSessionURI(uri)
	if !ok {
		return nil, fmt.Errorf("resource %s: %w", uri, errResourceNotFound)
	}
	c := s.authzContext(ctx)
	info, found := s.cfg.Backend.Lookup(id)
	if !found || !authz.Owns(c.Principal, info.Principal) {
		return nil, fmt.Errorf("resource %s: %w", uri, errResourceNotFound)
	}
	data, err := s.cfg.Backend.ReadResource(ctx, c, id, name)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", uri, err)
	}
	return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: "application/json", Text: string(data)}}, nil
}

// resourceNames lists a session's resources: widgets, context and, when the
// backend can name them, its model projections.
func (s *Server) resourceNames(id string) []string {
	names := []string{"widgets", "context"}
	if more, err := s.cfg.Backend.ResourceNames(id); err == nil {
		for _, n := range more {
			if n != "widgets" && n != "context" {
				names = append(names, n)
			}
		}
	}
	return names
}

// sessionResources is the caller's resources/list view of concrete session
// resources.
func (s *Server) sessionResources(c authz.Context) map[string]Resource {
	out := make(map[string]Resource)
	for _, info := range s.cfg.Backend.Sessions(c.Principal) {
		for _, n := range s.resourceNames(info.ID) {
			uri := SessionURI(info.ID, n)
			out[uri] = Resource{
				Resource: mcp.NewResource(uri, info.ID+" "+n, mcp.WithMIMEType("application/json"),
					mcp.WithResourceDescription(fmt.Sprintf("%s of session %s (%s)", n, info.ID, info.App))),
				Handler: s.readSessionResource,
			}
		}
	}
	return out
}
