package mcp

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// MCP Apps (SEP-1865, the extension io.modelcontextprotocol/ui): every
// session can be shown as a live app inside the client's host. The front
// serves one UI resource, the same on every node, and marks the tools that
// start or show a session with its URI. The app inside the host's iframe
// reads the session through swarm_app_view and acts through the session's
// derived tools, both proxied by the host as tools/call: the same gate as an
// agent's call (ownership, the authorizer, an Ask as an elicitation).

// Names of the MCP Apps extension.
const (
	// ExtensionUI is the extension's identifier in capabilities.
	ExtensionUI = "io.modelcontextprotocol/ui"
	// AppURI is the UI resource every session is shown with.
	AppURI = "ui://mcpswarm/session"
	// AppMIME is the MIME type of an MCP Apps HTML document.
	AppMIME = "text/html;profile=mcp-app"
	// metaUI is the _meta key of the extension on tools and contents.
	metaUI = "ui"
	// metaOpenAITemplate is what some ChatGPT versions read instead of
	// _meta.ui.resourceUri.
	metaOpenAITemplate = "openai/outputTemplate"
)

//go:embed apps/session.html apps/session.js apps/session.css
var appFiles embed.FS

// appDoc is the UI resource's HTML: the renderer and its style inlined,
// and a Content-Security-Policy that admits only those inlined bytes
// (by hash) and no network origin at all.
var appDoc = mustBuildAppDoc()

func mustBuildAppDoc() string {
	doc, err := buildAppDoc()
	if err != nil {
		panic(err)
	}
	return doc
}

// buildAppDoc inlines session.js and session.css into session.html.
func buildAppDoc() (string, error) {
	read := func(name string) (string, error) {
		b, err := appFiles.ReadFile("apps/" + name)
		if err != nil {
			return "", fmt.Errorf("reading the app's %s: %w", name, err)
		}
		return string(b), nil
	}
	html, err := read("session.html")
	if err != nil {
		return "", err
	}
	js, err := read("session.js")
	if err != nil {
		return "", err
	}
	css, err := read("session.css")
	if err != nil {
		return "", err
	}
	if strings.Contains(js, "</script") || strings.Contains(css, "</style") {
		return "", fmt.Errorf("the app's inlined assets must not close their own element")
	}
	hash := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	csp := "default-src 'none'; script-src " + hash(js) + "; style-src " + hash(css) +
		"; img-src 'none'; connect-src 'none'; frame-src 'none'; form-action 'none'; base-uri 'none'"
	r := strings.NewReplacer("{{CSP}}", csp, "{{SCRIPT}}", js, "{{STYLE}}", css)
	return r.Replace(html), nil
}

// AppHTML returns the UI resource's document (for tests and the README).
func AppHTML() string { return appDoc }

// appResourceMeta is the _meta.ui of the UI resource's content: a CSP that
// declares no origin of any kind, so hosts deny every network origin, and a
// border the host may draw. No domain: a wrong value stops some hosts from
// rendering.
func appResourceMeta() map[string]any {
	return map[string]any{metaUI: map[string]any{
		"csp": map[string]any{
			"connectDomains":  []string{},
			"resourceDomains": []string{},
			"frameDomains":    []string{},
			"baseUriDomains":  []string{},
		},
		"prefersBorder": true,
	}}
}

// appResource is the UI resource's listing entry.
func appResource() mcp.Resource {
	r := mcp.NewResource(AppURI, "mcpswarm session app",
		mcp.WithResourceDescription("The live view of one of your sessions, as an MCP App: its widgets, driven from the host."),
		mcp.WithMIMEType(AppMIME))
	r.Meta = mcp.NewMetaFromMap(appResourceMeta())
	return r
}

// readAppResource serves the UI resource: the same document on every node
// and for every caller. It holds no session data; the app reads its session
// through the host.
func readAppResource(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	if req.Params.URI != AppURI {
		return nil, fmt.Errorf("resource %s: %w", req.Params.URI, errResourceNotFound)
	}
	return []mcp.ResourceContents{mcp.TextResourceContents{
		URI: AppURI, MIMEType: AppMIME, Text: appDoc, Meta: appResourceMeta(),
	}}, nil
}

// appServerResource is the UI resource as a per-connection resource.
func appServerResource() Resource {
	return Resource{Resource: appResource(), Handler: readAppResource}
}

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
	_, ok := x.client.Capabilities.Extensions[ExtensionUI]
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
	ui := map[string]any{"resourceUri": AppURI}
	if v == uiAppOnly {
		ui["visibility"] = []string{"app"}
	} else {
		meta[metaOpenAITemplate] = AppURI
	}
	meta[metaUI] = ui
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

// uiExtensions is the server's extensions capability.
func uiExtensions() map[string]any {
	return map[string]any{ExtensionUI: map[string]any{"mimeTypes": []string{AppMIME}}}
}
