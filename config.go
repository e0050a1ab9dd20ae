package mcpswarm

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mcpswarm/mcpswarm/crdt"
	"github.com/mcpswarm/mcpswarm/mcp/task"
	"github.com/mcpswarm/mcpswarm/swarm"
)

// Config is everything a node needs to start. cmd/node fills it from flags,
// MCPSWARM_* environment variables and a YAML file; embedders fill it in Go.
type Config struct {
	// Name is the node's stable name (the pod name in Kubernetes).
	Name string
	// HTTPAddr serves MCP, /healthz, /readyz and /metrics.
	HTTPAddr string
	// GRPCAddr serves the peer and admin APIs.
	GRPCAddr string
	// GossipAddr is memberlist's bind address (TCP and UDP).
	GossipAddr string
	// Advertise is the host peers should use to reach this node; empty means
	// the host of each bind address.
	Advertise string
	// Join lists seed gossip addresses, or "dns:NAME" for a headless Service.
	Join []string
	// DNSServer (host:port) answers the "dns:NAME" lookups of Join instead
	// of the system's resolver configuration.
	DNSServer string
	// DataDir holds the node's bbolt file and its session snapshot journal.
	DataDir string
	// Durability says when a call that changed a session is answered (see
	// Durability's modes). Zero means DurabilityReplica when
	// SessionReplicas is at least 1, DurabilitySync otherwise.
	Durability Durability
	// SessionReplicas is how many standbys each session has on other
	// nodes (R): they hold its state and one takes it over when its owner
	// dies. 0 keeps a single copy on the owner.
	SessionReplicas int
	// Zone is this node's failure domain (a Kubernetes topology zone);
	// standbys are spread across zones first. Empty when unknown.
	Zone string
	// PolicyFile is the operator's authorization policy (YAML).
	PolicyFile string
	// Dev selects the built-in development policy (allow all) and, without a
	// key file, the public development cluster key. Loopback only.
	Dev bool
	// Stdio serves MCP over standard input and output.
	Stdio bool
	// ClusterKeyFile holds the cluster's shared secret (see `mcpswarm keygen`).
	ClusterKeyFile string
	// Startable lists the apps clients may start; empty means the demo apps.
	Startable []string
	// Conformance registers the MCP conformance suite's fixture tools,
	// resources and prompts on top of the normal surface.
	Conformance bool
	// ShutdownTimeout bounds how long in-flight work may take at shutdown.
	ShutdownTimeout time.Duration
	// DeadGrace is how long a dead node's entries stay hidden before they are
	// deleted.
	DeadGrace time.Duration
	// ProbeInterval is how often memberlist probes a member; the time to
	// declare a silent node dead scales with it (cluster.Config.ProbeInterval).
	// Zero keeps the timers of the gossip address: memberlist's LAN 1 s on
	// a network, 250 ms on loopback.
	ProbeInterval time.Duration
	// Keepalive is the ping interval on long-lived MCP streams (SSE, GET).
	Keepalive time.Duration
	// MaxBodyBytes bounds one MCP request body.
	MaxBodyBytes int64
	// HTTP bounds the HTTP listener's connections (timeouts and caps).
	HTTP HTTPLimits
	// Widgets bounds what widget actions can make a session hold.
	Widgets WidgetLimits
	// GRPC bounds what a connection can hold of the gRPC listener.
	GRPC GRPCLimits
	// MaxRevocations bounds the revocations of ended connections this node
	// holds; beyond it the oldest give way to a floor that refuses every
	// id issued before them (swarm.Config.MaxRevocations).
	MaxRevocations int
	// TaskLimits bounds MCP tasks: per principal, result size, TTLs
	// (zero fields take task.Limits' defaults).
	TaskLimits task.Limits
	// DebugAddr, when set, serves net/http/pprof there (loopback only).
	// Empty (the default) means no profiling endpoint.
	DebugAddr string
	// TLS, when set, puts the gRPC listener and peer connections under
	// mutual TLS; otherwise they run in plaintext with the peer credential.
	TLS TLSFiles
	// Version is reported in member metadata and `mcpswarm version`.
	Version string
}

// DefaultConfig returns the defaults documented on each flag.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	if host == "" {
		host = "node"
	}
	return Config{
		Name:            host,
		HTTPAddr:        "127.0.0.1:8080",
		GRPCAddr:        "127.0.0.1:9090",
		GossipAddr:      "127.0.0.1:7946",
		ShutdownTimeout: 10 * time.Second,
		DeadGrace:       30 * time.Second,
		Keepalive:       15 * time.Second,
		MaxBodyBytes:    4 << 20,
		SessionReplicas: 1,
		HTTP:            DefaultHTTPLimits(),
		Widgets:         DefaultWidgetLimits(),
		GRPC:            DefaultGRPCLimits(),
		MaxRevocations:  swarm.DefaultMaxRevocations,
		TaskLimits:      task.Limits{}.WithDefaults(),
	}
}

// maxSessionReplicas bounds --session-replicas: every standby is one more
// peer round trip and one more copy per write.
const maxSessionReplicas = 4

// minProbeInterval and maxProbeInterval bound --probe-interval: below,
// the probe timeout (half of it) nears a busy pod's scheduling delay and
// live nodes are declared dead; above, a dead one stays routed to for
// minutes.
const (
	minProbeInterval = 100 * time.Millisecond
	maxProbeInterval = 10 * time.Second
)

// FieldError is a configuration error that names the setting at fault, so
// the operator sees one line saying which flag to fix and why.
type FieldError struct {
	Flag string
	Err  error
}

func (e *FieldError) Error() string { return "--" + e.Flag + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

func fieldErr(flag string, format string, args ...any) error {
	return &FieldError{Flag: flag, Err: fmt.Errorf(format, args...)}
}

// Validate checks the configuration without touching the network. The first
// problem found is returned as a *FieldError.
func (c *Config) Validate() error {
	if !crdt.ValidName(c.Name) {
		return fieldErr("name", "%q is not a valid node name (1-64 of A-Z a-z 0-9 . _ -)", c.Name)
	}
	for _, a := range []struct{ flag, addr string }{{"http", c.HTTPAddr}, {"grpc", c.GRPCAddr}, {"gossip", c.GossipAddr}} {
		if err := validAddr(a.addr); err != nil {
			return &FieldError{Flag: a.flag, Err: err}
		}
	}
	for _, j := range c.Join {
		if strings.HasPrefix(j, "dns:") {
			if len(j) == len("dns:") {
				return fieldErr("join", "dns: needs a name, e.g. dns:mcpswarm-headless")
			}
			continue
		}
		if err := validAddr(j); err != nil {
			return &FieldError{Flag: "join", Err: err}
		}
	}
	if c.DebugAddr != "" {
		if err := validDebugAddr(c.DebugAddr); err != nil {
			return &FieldError{Flag: "debug-addr", Err: err}
		}
	}
	if c.DataDir == "" {
		return fieldErr("data-dir", "must not be empty")
	}
	if !c.Dev && c.ClusterKeyFile == "" && (len(c.Join) > 0) {
		return fieldErr("cluster-key-file", "joining a cluster needs the cluster key (write one with `mcpswarm keygen`), or --dev on loopback")
	}
	if c.Durability != 0 && !c.Durability.Valid() {
		return fieldErr("durability", "must be sync, process or replica")
	}
	if c.SessionReplicas < 0 || c.SessionReplicas > maxSessionReplicas {
		return fieldErr("session-replicas", "must be between 0 and %d, got %d", maxSessionReplicas, c.SessionReplicas)
	}
	if c.Durability == DurabilityReplica && c.SessionReplicas == 0 {
		return fieldErr("durability", "replica needs --session-replicas of at least 1")
	}
	if c.Zone != "" && !crdt.ValidName(c.Zone) {
		return fieldErr("zone", "%q is not a valid zone (1-64 of A-Z a-z 0-9 . _ -)", c.Zone)
	}
	if c.ShutdownTimeout <= 0 {
		return fieldErr("shutdown-timeout", "must be positive")
	}
	if c.DeadGrace <= 0 {
		return fieldErr("dead-grace", "must be positive")
	}
	if c.ProbeInterval != 0 && (c.ProbeInterval < minProbeInterval || c.ProbeInterval > maxProbeInterval) {
		return fieldErr("probe-interval", "must be 0 (the default timers) or from %s to %s, got %s", minProbeInterval, maxProbeInterval, c.ProbeInterval)
	}
	if c.Keepalive <= 0 {
		return fieldErr("keepalive", "must be positive")
	}
	if c.MaxBodyBytes < 1024 || c.MaxBodyBytes > 64<<20 {
		return fieldErr("max-body", "must be between 1 KiB and 64 MiB, got %d bytes", c.MaxBodyBytes)
	}
	if err := c.HTTP.validate(); err != nil {
		return err
	}
	if err := c.Widgets.validate(); err != nil {
		return err
	}
	if err := c.GRPC.validate(); err != nil {
		return err
	}
	if c.MaxRevocations < 1 || c.MaxRevocations > 1<<26 {
		return fieldErr("max-revocations", "must be from 1 to %d, got %d", 1<<26, c.MaxRevocations)
	}
	return c.validateTasks()
}

// validateTasks checks the task limits; zero fields take the defaults.
// A task's record, result included, is replicated to every peer in one
// message, so a result must fit well inside grpc-max-message-bytes.
func (c *Config) validateTasks() error {
	l := c.TaskLimits
	switch {
	case l.PerPrincipal < 0 || l.PerPrincipal > 1_000_000:
		return fieldErr("task-per-principal", "must be from 1 to 1000000 (0: the default %d), got %d", task.DefaultPerPrincipal, l.PerPrincipal)
	case l.MaxResultBytes < 0 || (l.MaxResultBytes > 0 && (l.MaxResultBytes < 1024 || l.MaxResultBytes > c.GRPC.MaxMessageBytes/2)):
		return fieldErr("task-max-result", "must be from 1 KiB to half of --grpc-max-message-bytes (%d), got %d", c.GRPC.MaxMessageBytes/2, l.MaxResultBytes)
	case l.MaxTTL < 0 || l.MaxTTL > 30*24*time.Hour:
		return fieldErr("task-max-ttl", "must be at most 720h, got %s", l.MaxTTL)
	case l.DefaultTTL < 0 || (l.MaxTTL > 0 && l.DefaultTTL > l.MaxTTL):
		return fieldErr("task-ttl", "must be positive and at most --task-max-ttl (%s), got %s", l.MaxTTL, l.DefaultTTL)
	case l.PollInterval < 0 || l.PollInterval > time.Minute:
		return fieldErr("task-poll-interval", "must be at most 1m, got %s", l.PollInterval)
	}
	return nil
}

// ClusterKey returns the cluster key from the key file, or the development
// key in --dev without one. dev reports whether the development key is used.
func (c *Config) ClusterKey() (key []byte, dev bool, err error) {
	if c.ClusterKeyFile != "" {
		k, err := LoadClusterKey(c.ClusterKeyFile)
		if err != nil {
			return nil, false, &FieldError{Flag: "cluster-key-file", Err: err}
		}
		return k, false, nil
	}
	if c.Dev {
		return DevClusterKey(), true, nil
	}
	// A single node without --dev and without a key still needs session-id
	// sealing and gossip encryption: a per-process random key keeps both
	// sound (ids do not survive a restart, and nobody can join).
	text, err := GenerateClusterKey()
	if err != nil {
		return nil, false, err
	}
	k, err := ParseClusterKey(text)
	return k, false, err
}

// CheckDataDir makes sure the data directory exists and is writable.
func (c *Config) CheckDataDir() error {
	if err := os.MkdirAll(c.DataDir, 0o750); err != nil {
		return &FieldError{Flag: "data-dir", Err: fmt.Errorf("not writable: %w", unwrapPath(err))}
	}
	f, err := os.CreateTemp(c.DataDir, ".probe-*")
	if err != nil {
		return &FieldError{Flag: "data-dir", Err: fmt.Errorf("not writable: %w", unwrapPath(err))}
	}
	name := f.Name()
	_ = f.Close()
	_ = os.Remove(name)
	return nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", filepath.Clean(pe.Path), pe.Err)
	}
	return err
}

func validAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("invalid address %q: want host:port", addr)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("invalid address %q: port %q is not a number from 0 to 65535", addr, port)
	}
	if host == "" {
		return nil
	}
	if net.ParseIP(host) == nil && !validHostname(host) {
		return fmt.Errorf("invalid address %q: %q is neither an IP nor a host name", addr, host)
	}
	return nil
}

func validHostname(h string) bool {
	if len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}
