package mcp

import (
	"context"
	"encoding/json"
	"maps"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mcpswarm/mcpswarm/mcp/apps"
)

// MCP Apps (SEP-1865, the extension io.modelcontextprotocol/ui): every
// session can be shown as a live app inside the client's host. The front
// serves one UI resource, the same on every node, and marks the tools that
// start or show a session with its URI. The app inside the host's iframe
// reads the session through swarm_app_view and acts through the session's
// derived tools, both proxied by the host as tools/call: the same gate as an
// agent's call (ownership, the authorizer, an Ask as an elicitation).

// offersUI reports whether the request's client is offered the app. A
// 2026-07-28 request is: its lists must not vary by connection, and a
// client without UI ignores the _meta.ui keys. A session-based client is
// offered it when it declared the extension at initialize.
// params are the request's params, read for their era when ctx has none.
// the request's era in ctx.
func offersUI(ctx context.Context, params json.RawMessage) bool {
	if isModern(ctx) || mcp.IsModernProtocol(metaVersion(params)) {
		return true
	}
	x := exchangeFrom(ctx)
	if x == nil {
		return false
	}
	_, ok := x.client.Capabilities.Extensions[apps.Extension]
	return ok
}

// uiVisibility is who may call a static tool shown with the app.
type uiVisibility int

const (
	// uiNone: the tool has nothing to do with the app.
	uiNone uiVisibility = iota
	// uiShows: the tool starts or shows a session; the host renders its
	// result with the app, and the model sees it as any tool.
	uiShows
	// uiAppOnly: only the app calls the tool (the host hides it from the
	// model); it is listed only to clients offered the app.
	uiAppOnly
)

// withUIMeta returns st with the _meta of its visibility; st itself is
// shared and never modified.
func withUIMeta(st Tool, v uiVisibility) Tool {
	if v == uiNone {
		return st
	}
	meta := map[string]any{}
	if st.Tool.Meta != nil {
		maps.Copy(meta, st.Tool.Meta.AdditionalFields)
	}
	ui := map[string]any{"resourceUri": apps.URI}
	if v == uiAppOnly {
		ui["visibility"] = []string{"app"}
	} else {
		meta[apps.MetaOpenAITemplate] = apps.URI
	}
	meta[apps.MetaUI] = ui
	st.Tool.Meta = mcp.NewMetaFromMap(meta)
	return st
}

// staticUITools returns the static tools as a client offered the app lists
// them: the ones that show a session carry the app's URI.
func staticUITools(plain map[string]Tool) map[string]Tool {
	out := make(map[string]Tool, len(plain))
	for _, d := range staticDefs {
		if st, ok := plain[d.name]; ok {
			out[d.name] = withUIMeta(st, d.ui)
		}
	}
	return out
}

// appServerResource is the UI resource as the front serves it.
func appServerResource() Resource {
	return Resource{Resource: apps.Resource(), Handler: apps.Read}
}
