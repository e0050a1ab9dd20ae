package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/mcp/task"
)

// Config configures a Server.
type Config struct {
	// Node is this node's name; it is sealed into the session ids it mints.
	Node string
	// Backend is where sessions, tools and members come from.
	Backend Backend
	// Guard holds the tool and read authorizers, limits and authenticator.
	Guard authz.Guard
	// RateLimiter limits tool calls per principal; nil means no limit.
	RateLimiter *authz.RateLimiter
	// SessionKey (32 bytes, derived from the cluster key) seals
	// Mcp-Session-Id values and 2026-07-28 requestState tokens.
	SessionKey []byte
	// Dev lets anonymous 2026-07-28 clients own sessions under the shared
	// "anonymous" principal.
	Dev bool
	// Keepalive is the ping interval on long-lived streams (default 15 s).
	Keepalive time.Duration
	// MaxBodyBytes bounds a request body (default 4 MiB).
	MaxBodyBytes int64
	// MaxBatch bounds a JSON-RPC batch (default 32); batches are refused.
	MaxBatch int
	// MaxDepth bounds JSON nesting in a request body (default 64).
	MaxDepth int
	// ElicitationTimeout bounds how long a parked call waits for the
	// client's approval (default 60 s).
	ElicitationTimeout time.Duration
	// StateTTL is how long a 2026-07-28 requestState stays valid (default 10 min).
	StateTTL time.Duration
	// IdleTTL ends a Streamable HTTP connection's node-local state after
	// this long without traffic (default 30 min).
	IdleTTL time.Duration
	// SessionMaxAge is how long a session id stays valid after initialize
	// (default 7 days); the client must initialize again after it.
	SessionMaxAge time.Duration
	// ResourceURL is the public URL of /mcp, used in OAuth protected
	// resource metadata; "" derives it from each request.
	ResourceURL string
	// AuthServers are advertised in the protected resource metadata.
	AuthServers []string
	// Logger receives the front's logs; nil means slog.Default().
	Logger *slog.Logger
	// Registerer receives the front's metrics; nil means none.
	Registerer prometheus.Registerer
	// Extend registers more tools, resources and prompts, e.g. the
	// conformance fixture's.
	Extend func(*Extension)
	// Cluster joins this front to the cluster: New attaches the front to it
	// and gets the connection registry and relay back (see Cluster). It is
	// required: a lone node is a one-node cluster.
	Cluster Cluster
	// Completer answers completion/complete for prompts and resource
	// templates registered through Extend (the front answers its own).
	Completer Completer
	// Tasks bound the tasks this front runs (zero fields: defaults).
	Tasks task.Limits
	// Version is reported to clients as the server version.
	Version string
}

// Completer completes prompt and resource-template arguments.
type Completer interface {
	CompletePromptArgument(ctx context.Context, prompt string, arg mcp.CompleteArgument, cc mcp.CompleteContext) (*mcp.Completion, error)
	CompleteResourceArgument(ctx context.Context, uri string, arg mcp.CompleteArgument, cc mcp.CompleteContext) (*mcp.Completion, error)
}

// Defaults for Config.
const (
	DefaultKeepalive          = 15 * time.Second
	DefaultElicitationTimeout = 60 * time.Second
	DefaultStateTTL           = 10 * time.Minute
	DefaultIdleTTL            = 30 * time.Minute
	DefaultSessionMaxAge      = 7 * 24 * time.Hour
)

func (c *Config) setDefaults() error {
	if c.Backend == nil {
		return errors.New("the config has no backend")
	}
	if c.Node == "" {
		return errors.New("the config has no node name")
	}
	if c.Cluster == nil {
		return errors.New("the config has no cluster: a front always joins one (a lone node is a one-node cluster)")
	}
	if len(c.SessionKey) != 32 {
		return fmt.Errorf("the session key must be 32 bytes, got %d", len(c.SessionKey))
	}
	if c.Keepalive == 0 {
		c.Keepalive = DefaultKeepalive
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.MaxDepth <= 0 {
		c.MaxDepth = DefaultMaxDepth
	}
	if c.ElicitationTimeout <= 0 {
		c.ElicitationTimeout = DefaultElicitationTimeout
	}
	if c.StateTTL <= 0 {
		c.StateTTL = DefaultStateTTL
	}
	if c.IdleTTL <= 0 {
		c.IdleTTL = DefaultIdleTTL
	}
	if c.SessionMaxAge <= 0 {
		c.SessionMaxAge = DefaultSessionMaxAge
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Tasks = c.Tasks.WithDefaults()
	if c.Version == "" {
		c.Version = "dev"
	}
	return nil
}
