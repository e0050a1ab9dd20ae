// Command profnode is `mcpswarm serve --dev` with Go's profiler attached: it
// builds the same node from the same Config the CLI would, and serves
// net/http/pprof on its own loopback listener (-pprof), so bench-compare can
// take CPU and allocation profiles of a node under its load without the
// production binary carrying a profiling endpoint.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/mcpswarm/mcpswarm"
)

func main() {
	cfg := mcpswarm.DefaultConfig()
	cfg.Dev = true
	flag.StringVar(&cfg.Name, "name", "prof", "node name")
	flag.StringVar(&cfg.HTTPAddr, "http", "127.0.0.1:0", "HTTP listen address")
	flag.StringVar(&cfg.GRPCAddr, "grpc", "127.0.0.1:0", "gRPC listen address")
	flag.StringVar(&cfg.GossipAddr, "gossip", "127.0.0.1:0", "gossip bind address")
	flag.StringVar(&cfg.DataDir, "data-dir", "", "bbolt directory (required)")
	flag.TextVar(&cfg.Durability, "durability", cfg.Durability, "when a call that changed a session is answered: sync or process (as `mcpswarm serve --durability`)")
	flag.IntVar(&cfg.SessionReplicas, "session-replicas", cfg.SessionReplicas, "standbys per session (as `mcpswarm serve --session-replicas`)")
	pprofAddr := flag.String("pprof", "127.0.0.1:6060", "net/http/pprof listen address")
	join := flag.String("join", "", "a seed's gossip address (the second node of a profiled cluster)")
	contention := flag.Bool("contention", false, "record mutex and blocking profiles (where calls wait, not where they spend CPU)")
	flag.Parse()
	if *contention {
		// One mutex event in 5 and a blocking event per 10 µs blocked:
		// enough samples in 10 s, little enough to keep the CPU figures.
		runtime.SetMutexProfileFraction(5)
		runtime.SetBlockProfileRate(10_000)
	}
	if *join != "" {
		cfg.Join = []string{*join}
	}
	if err := run(cfg, *pprofAddr); err != nil {
		fmt.Fprintln(os.Stderr, "profnode:", err)
		os.Exit(1)
	}
}

func run(cfg mcpswarm.Config, pprofAddr string) error {
	if cfg.DataDir == "" {
		return errors.New("-data-dir is required")
	}
	cfg.Version = mcpswarm.Version()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	dbg := &http.Server{Addr: pprofAddr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := dbg.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("pprof listener", "err", err)
		}
	}()
	defer dbg.Close()

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	node, err := mcpswarm.NewNode(cfg, mcpswarm.WithLogger(logger))
	if err != nil {
		return fmt.Errorf("creating the node: %w", err)
	}
	if err := node.Run(ctx); err != nil {
		return fmt.Errorf("running the node: %w", err)
	}
	return nil
}
