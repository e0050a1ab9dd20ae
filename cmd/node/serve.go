package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/mcpswarm/mcpswarm"
)

// serveFlags binds `mcpswarm serve`'s flags to a Config.
func serveFlags(cfg *mcpswarm.Config, logFormat, logLevel, configFile *string) *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(configFile, "config", "", "YAML file of settings (keys are these flag names); precedence: flag > MCPSWARM_<FLAG> > file > default")
	fs.StringVar(&cfg.Name, "name", cfg.Name, "node name, stable across restarts (the pod name in Kubernetes)")
	fs.StringVar(&cfg.HTTPAddr, "http", cfg.HTTPAddr, "HTTP listen address: MCP (/mcp, /sse), /healthz, /readyz, /metrics")
	fs.StringVar(&cfg.GRPCAddr, "grpc", cfg.GRPCAddr, "gRPC listen address: peer and admin APIs, gRPC health")
	fs.StringVar(&cfg.GossipAddr, "gossip", cfg.GossipAddr, "memberlist gossip bind address (TCP and UDP)")
	fs.StringVar(&cfg.Advertise, "advertise", cfg.Advertise, "host other nodes use to reach this one (default: the bind hosts)")
	fs.Var(listValue{&cfg.Join}, "join", "comma-separated gossip addresses of nodes to join, or dns:NAME for a Kubernetes headless Service")
	fs.StringVar(&cfg.DNSServer, "dns-server", "", "host:port of the DNS server for --join dns:NAME lookups (default: the system's)")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "directory of the node's bbolt file (default ./data/<name>)")
	fs.TextVar(&cfg.Durability, "durability", cfg.Durability, "when a call that changed a session is answered: replica (after write(2) and every in-sync standby's acknowledgement; survives the loss of the owner's machine; the default with --session-replicas >= 1), sync (after an fsync'd group commit; survives power loss; the default with --session-replicas 0, and what replica does while no standby holds the write), process (after write(2); survives kill -9, not power loss)")
	fs.IntVar(&cfg.SessionReplicas, "session-replicas", cfg.SessionReplicas, "standbys each session has on other nodes, holding its state to take it over when its owner dies (0: one copy, on the owner)")
	fs.StringVar(&cfg.Zone, "zone", cfg.Zone, "this node's failure domain (Kubernetes topology zone); standbys spread across zones")
	fs.StringVar(&cfg.PolicyFile, "policy", "", "authorization policy file (YAML); required on a network address unless --dev")
	fs.BoolVar(&cfg.Dev, "dev", false, "development mode: built-in allow-all policy and public cluster key; loopback addresses only")
	fs.BoolVar(&cfg.Stdio, "stdio", false, "serve MCP over standard input and output (logs go to stderr)")
	fs.StringVar(&cfg.ClusterKeyFile, "cluster-key-file", "", "file holding the cluster key (base64 of 32 bytes; write one with: mcpswarm keygen)")
	fs.Var(listValue{&cfg.Startable}, "startable", "comma-separated apps clients may start (default: the demo apps)")
	fs.BoolVar(&cfg.Conformance, "conformance", false, "also register the MCP conformance suite's fixture tools, resources and prompts")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", cfg.ShutdownTimeout, "how long in-flight calls may take at shutdown")
	fs.DurationVar(&cfg.DeadGrace, "dead-grace", cfg.DeadGrace, "how long a dead node's sessions stay hidden before they are deleted")
	fs.DurationVar(&cfg.ProbeInterval, "probe-interval", cfg.ProbeInterval, "how often gossip probes each node; a silent node is declared dead, and its sessions fail over, after about 5 to 6 intervals, and a node paused that long is declared dead too (0: 1s on a network, 250ms on loopback)")
	fs.DurationVar(&cfg.Keepalive, "keepalive", cfg.Keepalive, "ping interval on long-lived MCP streams, so proxies do not cut them")
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body", cfg.MaxBodyBytes, "largest MCP request body in bytes (larger ones get 413)")
	fs.DurationVar(&cfg.HTTP.HeaderTimeout, "http-header-timeout", cfg.HTTP.HeaderTimeout, "how long a client may take to send a request's headers")
	fs.DurationVar(&cfg.HTTP.BodyTimeout, "http-body-timeout", cfg.HTTP.BodyTimeout, "how long a client may take to send a request's body")
	fs.DurationVar(&cfg.HTTP.IdleTimeout, "http-idle-timeout", cfg.HTTP.IdleTimeout, "how long an idle keep-alive connection stays open")
	fs.IntVar(&cfg.HTTP.ConnsPerSource, "http-conns-per-source", cfg.HTTP.ConnsPerSource, "open HTTP connections one client IP may hold (0: no per-source cap; raise it behind a proxy)")
	fs.IntVar(&cfg.HTTP.MaxConns, "http-max-conns", cfg.HTTP.MaxConns, "open HTTP connections in all (0: from the file-descriptor limit, leaving headroom for gossip and gRPC)")
	fs.IntVar(&cfg.Widgets.TextBytes, "widget-text-bytes", cfg.Widgets.TextBytes, "longest string a client may hand a widget action, in bytes")
	fs.IntVar(&cfg.Widgets.TodoItems, "todo-max-items", cfg.Widgets.TodoItems, "items a todo demo session may hold")
	fs.IntVar(&cfg.Widgets.TodoTitleBytes, "todo-title-bytes", cfg.Widgets.TodoTitleBytes, "longest title of a todo item, in bytes")
	fs.IntVar(&cfg.Widgets.Files, "files-max", cfg.Widgets.Files, "files a files demo session may hold")
	fs.IntVar(&cfg.Widgets.Commands, "session-commands", cfg.Widgets.Commands, "commands (work an app's update starts, such as a job of the jobs demo) one session may run at once; an update asking for more is refused")
	fs.IntVar(&cfg.Widgets.JobSeconds, "jobs-max-seconds", cfg.Widgets.JobSeconds, "longest job of the jobs demo, in seconds")
	fs.IntVar(&cfg.TaskLimits.PerPrincipal, "task-per-principal", cfg.TaskLimits.PerPrincipal, "MCP tasks (running or finished, until their TTL) one principal may hold across the swarm")
	fs.IntVar(&cfg.TaskLimits.MaxResultBytes, "task-max-result", cfg.TaskLimits.MaxResultBytes, "largest result of an MCP task, in bytes; a larger one fails the task")
	fs.DurationVar(&cfg.TaskLimits.DefaultTTL, "task-ttl", cfg.TaskLimits.DefaultTTL, "how long an MCP task is kept when its client asks for no TTL")
	fs.DurationVar(&cfg.TaskLimits.MaxTTL, "task-max-ttl", cfg.TaskLimits.MaxTTL, "the longest TTL a client may ask for an MCP task")
	fs.DurationVar(&cfg.TaskLimits.PollInterval, "task-poll-interval", cfg.TaskLimits.PollInterval, "the interval between polls suggested to task clients")
	fs.IntVar(&cfg.GRPC.MaxMessageBytes, "grpc-max-message-bytes", cfg.GRPC.MaxMessageBytes, "largest gRPC message between peers, in bytes (the same on every node)")
	fs.IntVar(&cfg.GRPC.MaxStreams, "grpc-max-streams", cfg.GRPC.MaxStreams, "concurrent gRPC streams per connection")
	fs.IntVar(&cfg.GRPC.OpenStreams, "grpc-open-streams", cfg.GRPC.OpenStreams, "concurrent unauthenticated gRPC streams (health, reflection) in all")
	fs.DurationVar(&cfg.GRPC.OpenDeadline, "grpc-open-deadline", cfg.GRPC.OpenDeadline, "how long an unauthenticated gRPC stream may last")
	fs.DurationVar(&cfg.GRPC.HandshakeTimeout, "grpc-handshake-timeout", cfg.GRPC.HandshakeTimeout, "how long a gRPC connection may take for its TLS handshake and HTTP/2 preface")
	fs.DurationVar(&cfg.GRPC.IdleTimeout, "grpc-idle-timeout", cfg.GRPC.IdleTimeout, "how long a gRPC connection without streams stays open")
	fs.IntVar(&cfg.MaxRevocations, "max-revocations", cfg.MaxRevocations, "revocations of ended connections this node keeps; beyond it the oldest give way to a floor that refuses every id issued before them (their clients initialize again)")
	fs.StringVar(&cfg.TLS.Cert, "tls-cert", "", "PEM certificate of this node for the gRPC listener and peer connections (with --tls-key and --tls-ca)")
	fs.StringVar(&cfg.TLS.Key, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&cfg.TLS.CA, "tls-ca", "", "PEM CA bundle that signs every node's certificate")
	fs.StringVar(&cfg.DebugAddr, "debug-addr", "", "loopback address serving net/http/pprof (heap, goroutine profiles; unauthenticated, so loopback only; default: off)")
	fs.StringVar(logFormat, "log-format", "auto", "log format: text, json, or auto (text on a terminal, else json)")
	fs.StringVar(logLevel, "log-level", "info", "log level: debug, info, warn, error")
	return fs
}

func runServe(ctx context.Context, args []string, env environment) int {
	cfg := mcpswarm.DefaultConfig()
	var logFormat, logLevel, configFile string
	fs := serveFlags(&cfg, &logFormat, &logLevel, &configFile)
	// Parse errors are reported as one line by us; the full flag list is
	// for --help only.
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(env.stdout)
			fmt.Fprintln(env.stdout, "Usage: mcpswarm serve [flags]\n\nRuns a node. Every flag may also come from MCPSWARM_<FLAG> (e.g. MCPSWARM_DATA_DIR)\nor from the --config YAML file; precedence: flag > environment > file > default.\n\nFlags:")
			fs.PrintDefaults()
			return 0
		}
		fmt.Fprintf(env.stderr, "mcpswarm serve: %v (see `mcpswarm serve --help`)\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.stderr, "mcpswarm serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if err := (settings{fs: fs, getenv: env.getenv}).resolve(); err != nil {
		fmt.Fprintf(env.stderr, "mcpswarm serve: %v\n", err)
		return 2
	}
	if cfg.DataDir == "" {
		cfg.DataDir = filepath.Join("data", cfg.Name)
	}
	cfg.Version = mcpswarm.Version()

	logOut := env.stderr
	logger, err := newLogger(logOut, logFormat, logLevel)
	if err != nil {
		fmt.Fprintf(env.stderr, "mcpswarm serve: %v\n", err)
		return 2
	}

	ctx, stop := signalContext(ctx, logger)
	defer stop()
	if cfg.Stdio {
		// A stdio client may close our stdout and stderr before we finish
		// shutting down; the writes then fail (and are dropped) instead of
		// SIGPIPE killing the process mid-shutdown.
		signal.Ignore(syscall.SIGPIPE)
	}

	node, err := mcpswarm.NewNode(cfg, mcpswarm.WithLogger(logger), mcpswarm.WithStdio(env.stdin, env.stdout))
	if err != nil {
		fmt.Fprintf(env.stderr, "mcpswarm serve: %v\n", err)
		return 1
	}
	if err := node.Run(ctx); err != nil {
		fmt.Fprintf(env.stderr, "mcpswarm serve: %v\n", err)
		return 1
	}
	return 0
}

// signalContext is cancelled by the first SIGINT or SIGTERM, which starts a
// graceful shutdown; a second signal exits at once.
func signalContext(parent context.Context, logger *slog.Logger) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			logger.Info("shutting down (send the signal again to force exit)", "signal", s.String())
			cancel()
		case <-done:
			return
		}
		select {
		case s := <-sigs:
			logger.Error("forced exit", "signal", s.String())
			os.Exit(130)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %q is not one of debug, info, warn, error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "auto":
		if f, ok := w.(*os.File); ok && isTerminal(f) {
			return slog.New(slog.NewTextHandler(w, opts)), nil
		}
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format: %q is not one of text, json, auto", format)
	}
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
