package ui

import (
	"context"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/mcp"
)

//go:embed assets templates
var assets embed.FS

// Transport is the authz.Transport of calls made from the page. Policy rules
// that name transports never match it, so such a rule cannot open the page
// by accident; rules without a transport match apply as for MCP.
const Transport authz.Transport = "ui"

// Config wires a Handler.
type Config struct {
	// Node is this node's name, shown in the page and put in authz.Context.
	Node string
	// Backend is the swarm view the MCP front serves from (not the Observed
	// wrapper: the page journals its own actions as SourcePage).
	Backend mcp.Backend
	// Guard is the node's authorization, the same the MCP front uses.
	Guard authz.Guard
	// RateLimiter is the MCP front's per-principal limiter (shared, so the
	// page cannot be used to go around it); nil means no limit.
	RateLimiter *authz.RateLimiter
	// Journal is the replicated action journal; required.
	Journal *Journal
	// Key signs CSRF tokens; derive it from the cluster key so any node
	// accepts a page another node rendered.
	Key []byte
	// ReplicationLag reports, per peer name, how many of this node's
	// registry updates the peer has not yet acknowledged; nil hides the
	// column.
	ReplicationLag func() map[string]float64
	// Dev opens the page without a token when none is configured (the boot
	// gate confines --dev to loopback).
	Dev bool
	// Logger; nil discards.
	Logger *slog.Logger
}

// Handler serves /ui. Close ends its live streams (call it before the HTTP
// server's Shutdown, which waits for them).
type Handler struct {
	cfg   Config
	log   *slog.Logger
	mux   *http.ServeMux
	pages *template.Template

	ctx     context.Context
	cancel  context.CancelFunc
	unwatch func()

	mu      sync.Mutex // orders streams.Add with Close's Wait
	closed  bool
	streams sync.WaitGroup
}

// New builds the handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Backend == nil || cfg.Journal == nil {
		return nil, errors.New("ui: Backend and Journal are required")
	}
	if len(cfg.Key) < 16 {
		return nil, errors.New("ui: Key must be at least 16 bytes")
	}
	pages, err := template.ParseFS(assets, "templates/*.html")
	if err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, log: cfg.Logger, pages: pages, mux: http.NewServeMux()}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	// A stopped session's journal entries go with it (each node removes
	// those it wrote).
	h.unwatch = cfg.Backend.Watch(func(ev mcp.Event) {
		if ev.Kind == mcp.SessionsChanged {
			if _, ok := cfg.Backend.Lookup(ev.Session); !ok {
				cfg.Journal.Forget(ev.Session)
			}
		}
	})
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	files := http.StripPrefix("/ui/assets/", http.FileServerFS(static))
	h.mux.Handle("GET /ui/assets/", noIndex(files))
	h.mux.HandleFunc("/ui/login", h.serveLogin)
	h.mux.HandleFunc("POST /ui/logout", h.authed(h.serveLogout, true))
	h.mux.HandleFunc("GET /ui/{$}", h.authed(h.serveSwarmPage, false))
	h.mux.HandleFunc("GET /ui/sessions/{id}", h.authed(h.serveSessionPage, false))
	h.mux.HandleFunc("GET /ui/api/swarm", h.authed(h.serveSwarmStream, false))
	h.mux.HandleFunc("GET /ui/api/sessions/{id}", h.authed(h.serveSessionStream, false))
	h.mux.HandleFunc("POST /ui/api/sessions/{id}/act", h.authed(h.serveAct, true))
	h.mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
	})
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := sameOrigin(r); err != nil {
		http.Error(w, "Forbidden: "+err.Error(), http.StatusForbidden)
		return
	}
	hdr := w.Header()
	// Scripts and styles only from this node, no inline script, no frames:
	// even text that slipped into markup could not run.
	hdr.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	hdr.Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: with no-referrer the browser sends
	// "Origin: null" on form posts, which sameOrigin must refuse.
	hdr.Set("Referrer-Policy", "same-origin")
	h.mux.ServeHTTP(w, r)
}

// Close ends every live stream and waits for their handlers to return.
func (h *Handler) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	h.mu.Unlock()
	h.unwatch()
	h.cancel()
	h.streams.Wait()
}

// open registers a live stream; false once the handler is closing.
func (h *Handler) open() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.streams.Add(1)
	return true
}

type ctxKey struct{}

// who is the caller of an authenticated request.
type who struct {
	principal  authz.Principal
	credential string
}

func whoFrom(ctx context.Context) who { w, _ := ctx.Value(ctxKey{}).(who); return w }

// authed runs next only for an identified caller; action requires a valid
// CSRF token too. Pages redirect to the login page; the API answers 401.
func (h *Handler) authed(next http.HandlerFunc, action bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, cred, err := h.identify(r)
		if err != nil {
			api := strings.HasPrefix(r.URL.Path, "/ui/api/")
			switch {
			case errors.Is(err, errNoCredentials):
				http.Error(w, "Forbidden: "+err.Error(), http.StatusForbidden)
			case api || r.Method != http.MethodGet:
				writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "unauthenticated", "detail": "log in at /ui/login"})
			default:
				http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.Path), http.StatusSeeOther)
			}
			return
		}
		if action && !h.checkCSRF(r, cred) {
			writeJSON(w, http.StatusForbidden, map[string]any{"error": "csrf", "detail": "missing or invalid CSRF token: reload the page"})
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, who{p, cred})))
	}
}

// authzContext is the authorization context of a page request.
func (h *Handler) authzContext(p authz.Principal) authz.Context {
	return authz.Context{Principal: p, Transport: Transport, Node: h.cfg.Node}
}

// allowedRead runs the read authorizer as resources/read of uri would.
func (h *Handler) allowedRead(ctx context.Context, p authz.Principal, uri string) authz.Decision {
	return authz.SafeDecideRead(ctx, h.cfg.Guard.Reads, "resources/read", map[string]any{"uri": uri}, h.authzContext(p))
}

func noIndex(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		next.ServeHTTP(w, r)
	})
}
