// Package apps is the MCP Apps extension (SEP-1865,
// io.modelcontextprotocol/ui) as the front serves it: the one UI resource
// every session is shown with, the same document on every node, and the
// waiters that keep the app's long poll live. It has no I/O.
package apps

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// ErrNotFound answers a read of any URI but the app's.
var ErrNotFound = errors.New("resource not found")

// Names of the MCP Apps extension.
const (
	// Extension is the extension's identifier in capabilities.
	Extension = "io.modelcontextprotocol/ui"
	// URI is the UI resource every session is shown with.
	URI = "ui://mcpswarm/session"
	// MIME is the MIME type of an MCP Apps HTML document.
	MIME = "text/html;profile=mcp-app"
	// MetaUI is the _meta key of the extension on tools and contents.
	MetaUI = "ui"
	// MetaOpenAITemplate is what some ChatGPT versions read instead of
	// _meta.ui.resourceUri.
	MetaOpenAITemplate = "openai/outputTemplate"
)

//go:embed session.html session.js session.css
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
		b, err := appFiles.ReadFile(name)
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

// HTML returns the UI resource's document.
func HTML() string { return appDoc }

// ResourceMeta is the _meta.ui of the UI resource's content: a CSP that
// declares no origin of any kind, so hosts deny every network origin, and a
// border the host may draw. No domain: a wrong value stops some hosts from
// rendering.
func ResourceMeta() map[string]any {
	return map[string]any{MetaUI: map[string]any{
		"csp": map[string]any{
			"connectDomains":  []string{},
			"resourceDomains": []string{},
			"frameDomains":    []string{},
			"baseUriDomains":  []string{},
		},
		"prefersBorder": true,
	}}
}

// Resource is the UI resource's listing entry.
func Resource() mcp.Resource {
	r := mcp.NewResource(URI, "mcpswarm session app",
		mcp.WithResourceDescription("The live view of one of your sessions, as an MCP App: its widgets, driven from the host."),
		mcp.WithMIMEType(MIME))
	r.Meta = mcp.NewMetaFromMap(ResourceMeta())
	return r
}

// Read serves the UI resource: the same document on every node
// and for every caller. It holds no session data; the app reads its session
// through the host.
func Read(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	if req.Params.URI != URI {
		return nil, fmt.Errorf("resource %s: %w", req.Params.URI, ErrNotFound)
	}
	return []mcp.ResourceContents{mcp.TextResourceContents{
		URI: URI, MIMEType: MIME, Text: appDoc, Meta: ResourceMeta(),
	}}, nil
}

// Extensions is the server's extensions capability.
func Extensions() map[string]any {
	return map[string]any{Extension: map[string]any{"mimeTypes": []string{MIME}}}
}

// Waiters wakes the calls waiting for a session to change (the app's
// long poll, swarm_app_view).
type Waiters struct {
	mu sync.Mutex
	// bySession holds one channel per waiting call, closed on a change.
	bySession map[string]map[chan struct{}]struct{}
	// closed is set at shutdown: no call waits any more, so none holds
	// the drain of requests in flight.
	closed bool
}

// NewWaiters returns Waiters with nobody waiting.
func NewWaiters() *Waiters {
	return &Waiters{bySession: map[string]map[chan struct{}]struct{}{}}
}

// Wait registers a waiter on session id; done must be called once.
func (a *Waiters) Wait(id string) (changed <-chan struct{}, done func()) {
	ch := make(chan struct{})
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		close(ch)
		return ch, func() {}
	}
	set := a.bySession[id]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		a.bySession[id] = set
	}
	set[ch] = struct{}{}
	a.mu.Unlock()
	return ch, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if set, ok := a.bySession[id]; ok {
			if _, waiting := set[ch]; waiting {
				delete(set, ch)
				if len(set) == 0 {
					delete(a.bySession, id)
				}
			}
		}
	}
}

// Waiting reports how many calls wait on session id.
func (a *Waiters) Waiting(id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.bySession[id])
}

// IsClosed reports whether CloseAll ran.
func (a *Waiters) IsClosed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closed
}

// Wake releases every call waiting on session id.
func (a *Waiters) Wake(id string) {
	a.mu.Lock()
	set := a.bySession[id]
	delete(a.bySession, id)
	a.mu.Unlock()
	for ch := range set {
		close(ch)
	}
}

// CloseAll releases every waiting call and keeps later ones from waiting.
func (a *Waiters) CloseAll() {
	a.mu.Lock()
	all := a.bySession
	a.bySession, a.closed = map[string]map[chan struct{}]struct{}{}, true
	a.mu.Unlock()
	for _, set := range all {
		for ch := range set {
			close(ch)
		}
	}
}
