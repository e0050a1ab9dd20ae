package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpswarm/mcpswarm/authz"
)

// Server is the MCP front of one node: Streamable HTTP at /mcp, legacy
// HTTP+SSE at /sse and /message, and stdio, all serving per-connection
// views of the Backend.
type Server struct {
	cfg    Config
	log    *slog.Logger
	mcp    *server.MCPServer
	stream *server.StreamableHTTPServer
	sse    *server.SSEServer
	ids    *SessionIDs
	states *stateSealer
	conns  *connTable
	// registry and relay are the cluster's side of the seam (Cluster.Attach);
	// nil on a lone node.
	registry Connections
	relay    Relay
	init     *initGate
	parked   *parking
	asks     *clientRequests
	streams  *sseStreams
	// posts routes backend notifications through a connection's POSTs
	// (see postroute.go).
	posts   *postRoutes
	metrics *metrics
	static  map[string]Tool
	// staticUI is static as listed to a client offered the app (apps.go).
	staticUI map[string]Tool
	// appWaits wakes swarm_app_view calls waiting for a session to change.
	appWaits *appWaiters
	// staticViews holds each static tool's one-tool call view.
	staticViews map[string]map[string]Tool
	tools       toolCache
	handler     http.Handler
	// touched and versions serve tool calls past mcp-go's transport
	// (directcall.go).
	touched  *touchClock
	versions []string
	calls    inflightCalls

	stopWatch func()
	closeOnce sync.Once
	drain     requestDrain
}

// New builds a Server from cfg.
func New(cfg Config) (*Server, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, fmt.Errorf("configuring the mcp front: %w", err)
	}
	ids, err := NewSessionIDs(cfg.SessionKey, cfg.Node)
	if err != nil {
		return nil, fmt.Errorf("configuring the mcp front: %w", err)
	}
	ids.SetMaxAge(cfg.SessionMaxAge)
	states, err := newStateSealer(cfg.SessionKey, cfg.StateTTL)
	if err != nil {
		return nil, fmt.Errorf("configuring the mcp front: %w", err)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("configuring the mcp front: %w", err)
	}
	s := &Server{
		cfg: cfg, log: cfg.Logger, ids: ids, states: states, init: newInitGate(cfg.Guard.Limits, cfg.Dev, cfg.IdleTTL),
		parked: newParking(), asks: newClientRequests(cfg.Node), streams: newSSEStreams(), posts: newPostRoutes(), metrics: m,
	}

	hooks := &server.Hooks{}
	hooks.AddOnRequestInitialization(s.beforeRequest)
	hooks.AddOnRegisterSession(s.onRegister)
	hooks.AddOnUnregisterSession(s.onUnregister)
	hooks.AddAfterSubscribe(s.afterSubscribe)
	hooks.AddAfterUnsubscribe(s.afterUnsubscribe)
	hooks.AddBeforeSubscriptionsListen(s.beforeListen)
	hooks.AddAfterInitialize(s.afterInitialize)
	hooks.AddAfterSetLevel(s.afterSetLevel)

	s.mcp = server.NewMCPServer("mcpswarm", cfg.Version,
		server.WithToolCapabilities(true),
		server.WithResourceCapabilities(true, true),
		server.WithPromptCapabilities(false),
		server.WithLogging(),
		server.WithCompletions(),
		server.WithElicitation(),
		server.WithHooks(hooks),
		server.WithRecovery(),
		server.WithResourceRecovery(),
		server.WithPromptCompletionProvider(completer{s}),
		server.WithResourceCompletionProvider(completer{s}),
		server.WithInstructions(instructions),
		server.WithExtensions(uiExtensions()),
	)
	s.static = s.staticTools()
	s.staticViews = oneToolViews(s.static)
	s.staticUI = staticUITools(s.static)
	s.appWaits = newAppWaiters()
	s.addResources()
	s.addPrompts()
	if cfg.Extend != nil {
		cfg.Extend(s.mcp)
	}

	s.stream = server.NewStreamableHTTPServer(s.mcp,
		server.WithEndpointPath("/mcp"),
		server.WithSessionIdManagerResolver(checkedResolver{resolver{ids}}),
		server.WithHeartbeatInterval(cfg.Keepalive),
		// Any event store makes the POST wait for its notification
		// forwarder before answering, which closes mcp-go's race that
		// loses progress and log notifications; ours records nothing.
		server.WithEventStore(noopEventStore{}),
		server.WithSessionIdleTTL(cfg.IdleTTL),
		server.WithHTTPContextFunc(s.wrapContext),
		server.WithStreamableHTTPLogger(cfg.Logger),
	)
	s.versions = server.FilterSupportedVersions(s.stream)
	s.touched = newTouchClock(cfg.IdleTTL / 4)
	s.sse = server.NewSSEServer(s.mcp,
		server.WithSSEEndpoint("/sse"),
		server.WithMessageEndpoint("/message"),
		server.WithUseFullURLForMessageEndpoint(false),
		server.WithKeepAliveInterval(cfg.Keepalive),
		server.WithSSEContextFunc(s.sseContext),
		server.WithSessionIDGenerator(s.sseSessionID),
	)
	s.handler = s.front()
	// The one step that joins the front to the cluster: the cluster gets
	// the front, the front gets the registry and the relay. It comes last,
	// once the front is built, and before it serves or watches anything.
	if cfg.Cluster != nil {
		s.registry, s.relay = cfg.Cluster.Attach(s)
	}
	if s.registry != nil {
		// Set before any use: the ids are not shared yet.
		ids.SetCluster(s.registry)
		states.registry = s.registry
		s.init.conns.attach(s.registry, s)
	}
	s.conns = newConnTable(s.registry)
	s.stopWatch = cfg.Backend.Watch(s.onEvent)
	return s, nil
}

const instructions = "mcpswarm serves headless app sessions as tools. Call swarm_apps to see what you can start, " +
	"swarm_start to start one, swarm_list to see your sessions; each session's widgets become tools named " +
	"<session>.<widget>.<action>, and <session>.discover_tools searches them."

// Handler serves /mcp, /sse, /message and /.well-known/oauth-protected-resource.
func (s *Server) Handler() http.Handler { return s.handler }

// MCPServer returns the underlying mcp-go server (for in-process clients
// and fixtures).
func (s *Server) MCPServer() *server.MCPServer { return s.mcp }

// SessionIDs returns the sealer of this node's session ids.
func (s *Server) SessionIDs() *SessionIDs { return s.ids }

// SensitiveStaticTools names the static tools annotated sensitive or
// destructive, for authz.CheckBoot.
func (s *Server) SensitiveStaticTools() []string {
	var out []string
	for _, d := range staticDefs {
		if d.sensitive {
			out = append(out, d.name)
		}
	}
	return out
}

// Shutdown closes client streams, denies parked calls and stops watching
// the backend.
func (s *Server) Shutdown(ctx context.Context) error {
	var errs []error
	s.closeOnce.Do(func() {
		s.stopWatch()
		s.appWaits.closeAll()
		s.parked.closeAll(outcomeShutdown)
		if err := s.stream.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("closing streamable http sessions: %w", err))
		}
		if err := s.drain.close(ctx, func() { s.stream.CloseSessions(ctx) }); err != nil {
			errs = append(errs, fmt.Errorf("waiting for streamable http requests in flight: %w", err))
		}
		if err := s.sse.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("closing sse sessions: %w", err))
		}
		s.streams.closeAll()
	})
	return errors.Join(errs...)
}

// wrapContext gives every request its own view session (see viewSession).
func (s *Server) wrapContext(ctx context.Context, _ *http.Request) context.Context {
	cs := server.ClientSessionFromContext(ctx)
	if cs == nil {
		return ctx
	}
	if _, ok := cs.(*viewSession); ok {
		return ctx
	}
	vs := newViewSession(cs)
	vs.post = postStreamFrom(ctx)
	vs.asks = s.asks
	return s.mcp.WithContext(ctx, vs)
}

// readMethods are guarded by the read authorizer.
var readMethods = map[string]bool{
	string(mcp.MethodToolsList):              true,
	string(mcp.MethodResourcesList):          true,
	string(mcp.MethodResourcesTemplatesList): true,
	string(mcp.MethodResourcesRead):          true,
	string(mcp.MethodResourcesSubscribe):     true,
	string(mcp.MethodResourcesUnsubscribe):   true,
	string(mcp.MethodPromptsList):            true,
	string(mcp.MethodPromptsGet):             true,
	string(mcp.MethodCompletionComplete):     true,
	string(mcp.MethodSetLogLevel):            true,
}

// decideRead runs the read authorizer for method; nil means allowed.
func (s *Server) decideRead(ctx context.Context, c authz.Context, method string, params json.RawMessage) *rpcError {
	if !readMethods[method] {
		return nil
	}
	var p any
	if len(params) > 0 {
		_ = json.Unmarshal(params, &p)
	}
	d := authz.SafeDecideRead(ctx, s.cfg.Guard.Reads, method, p, c)
	if d.Kind == authz.KindAllow {
		return nil
	}
	return &rpcError{Code: authz.ReadDeniedCode, Message: "forbidden: " + d.Detail(), Data: authz.ReadDenied(method, d)}
}

// beforeRequest runs before mcp-go dispatches a request: it installs the
// caller's view of tools and resources on the request's view session, and
// guards the read surface for callers no transport precheck covered.
func (s *Server) beforeRequest(ctx context.Context, _ any, message any) error {
	raw, ok := message.(json.RawMessage)
	if !ok {
		return nil
	}
	var head struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	tool := ""
	if env, ok := checkedEnvelope(ctx, raw); ok {
		head.Method, head.Params = env.Method, env.Params
		tool = requestFrom(ctx).tool
	} else if err := json.Unmarshal(raw, &head); err != nil {
		return nil
	}
	vs, _ := server.ClientSessionFromContext(ctx).(*viewSession)
	c := s.authzContext(ctx)
	if id, ok := identityFrom(ctx); !ok || !id.prechecked {
		if e := s.decideRead(ctx, c, head.Method, head.Params); e != nil {
			return errors.New(e.Message)
		}
	}
	if vs == nil {
		return nil
	}
	s.applyConn(vs)
	switch head.Method {
	case string(mcp.MethodToolsList):
		vs.SetSessionTools(s.listView(ctx, c, offersUI(ctx, head.Params)))
	case string(mcp.MethodToolsCall):
		if tool == "" {
			var p struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(head.Params, &p)
			tool = p.Name
		}
		view := s.callView(c, tool)
		if c.Transport == authz.TransportStdio {
			// stdio has one view session for all its (concurrent)
			// requests: keep the listing whole while a call runs.
			full := s.listView(ctx, c, offersUI(ctx, head.Params))
			for k, v := range view {
				full[k] = v
			}
			view = full
		}
		vs.SetSessionTools(view)
	case string(mcp.MethodResourcesList), string(mcp.MethodResourcesRead):
		res := s.sessionResources(c)
		if offersUI(ctx, head.Params) {
			res[AppURI] = appServerResource()
		}
		vs.setResources(res)
	case string(mcp.MethodResourcesSubscribe):
		var p struct {
			URI string `json:"uri"`
		}
		_ = json.Unmarshal(head.Params, &p)
		if err := s.checkResourceAccess(c, p.URI); err != nil {
			return err
		}
	case string(mcp.MethodSubscriptionsListen):
		var p mcp.SubscriptionsListenParams
		_ = json.Unmarshal(head.Params, &p)
		for _, uri := range p.Notifications.ResourceSubscriptions {
			if err := s.checkResourceAccess(c, uri); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkResourceAccess refuses a session resource of a session c.Principal
// does not own (named as not found, so ids of others stay hidden).
func (s *Server) checkResourceAccess(c authz.Context, uri string) error {
	id, _, ok := parseSessionURI(uri)
	if !ok {
		return nil
	}
	info, found := s.cfg.Backend.Lookup(id)
	if !found || !authz.Owns(c.Principal, info.Principal) {
		return fmt.Errorf("resource %s not found", uri)
	}
	return nil
}

func splitDerived(name string) (sessionID string, ok bool) {
	sid, rest, found := strings.Cut(name, ".")
	return sid, found && sid != "" && rest != ""
}
