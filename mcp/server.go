package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mcpswarm/mcpswarm/mcp/apps"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/mcp/inflight"
	"github.com/mcpswarm/mcpswarm/mcp/seal"
	"github.com/mcpswarm/mcpswarm/mcp/task"
)

// Server is the MCP front of one node: Streamable HTTP at /mcp, legacy
// HTTP+SSE at /sse and /message, and stdio, all serving per-connection
// views of the Backend through one dispatcher (rpc.go).
type Server struct {
	cfg    Config
	log    *slog.Logger
	ids    *seal.SessionIDs
	states *seal.States
	conns  *connTable
	// registry and relay are the cluster's side of the seam (Cluster.Attach).
	registry Connections
	relay    Relay
	tasks    *task.Service // nil when the cluster keeps no task table
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
	appWaits *apps.Waiters
	tools    toolCache
	// ext holds the front's own resources, templates and prompts and what
	// Config.Extend added.
	ext      *Extension
	handler  http.Handler
	versions []string
	calls    inflight.Calls
	// pings numbers keepalive pings and listen streams.
	pings atomic.Int64

	stopWatch func()
	closeOnce sync.Once
	// closing ends every held stream at Shutdown.
	closing chan struct{}
	drain   inflight.Drain
}

// New builds a Server from cfg.
func New(cfg Config) (*Server, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, fmt.Errorf("configuring the mcp front: %w", err)
	}
	ids, err := seal.NewSessionIDs(cfg.SessionKey, cfg.Node)
	if err != nil {
		return nil, fmt.Errorf("configuring the mcp front: %w", err)
	}
	ids.SetMaxAge(cfg.SessionMaxAge)
	states, err := seal.NewStates(cfg.SessionKey, cfg.StateTTL)
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
		ext: newExtension(), versions: slices.Clone(mcp.ValidProtocolVersions), closing: make(chan struct{}),
	}
	s.static = s.staticTools()
	s.staticUI = staticUITools(s.static)
	s.appWaits = apps.NewWaiters()
	s.addResources()
	s.addPrompts()
	if cfg.Extend != nil {
		cfg.Extend(s.ext)
	}
	s.handler = s.front()
	// The one step that joins the front to the cluster: the cluster gets
	// the front, the front gets the registry and the relay. It comes last,
	// once the front is built, and before it serves or watches anything.
	var store task.Store
	s.registry, s.relay, store = cfg.Cluster.Attach(s)
	// Set before any use: the ids are not shared yet.
	ids.SetCluster(s.registry)
	states.SetSpender(s.registry)
	s.init.conns.attach(s.registry, s)
	s.conns = newConnTable(s.registry, cfg.IdleTTL)
	if store != nil { // watched from here on: pushes need s.conns
		s.tasks = task.NewService(task.Config{Node: cfg.Node, Store: store, Limits: cfg.Tasks, Logger: cfg.Logger, OnChange: s.pushTask})
	}
	s.stopWatch = cfg.Backend.Watch(s.onEvent)
	return s, nil
}

const instructions = "mcpswarm serves headless app sessions as tools. Call swarm_apps to see what you can start, " +
	"swarm_start to start one, swarm_list to see your sessions; each session's widgets become tools named " +
	"<session>.<widget>.<action>, and <session>.discover_tools searches them."

// Handler serves /mcp, /sse, /message and /.well-known/oauth-protected-resource.
func (s *Server) Handler() http.Handler { return s.handler }

// SessionIDs returns the sealer of this node's session ids.
func (s *Server) SessionIDs() *seal.SessionIDs { return s.ids }

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
// the backend; it waits for the requests in flight until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	var err error
	s.closeOnce.Do(func() {
		s.stopWatch()
		s.appWaits.CloseAll()
		s.parked.closeAll(outcomeShutdown)
		if s.tasks != nil {
			s.tasks.Close()
		}
		close(s.closing)
		s.streams.closeAll()
		if e := s.drain.Close(ctx); e != nil {
			err = fmt.Errorf("waiting for the requests in flight: %w", e)
		}
	})
	return err
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
