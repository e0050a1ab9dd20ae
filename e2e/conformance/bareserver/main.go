// Command bareserver serves the conformance fixture (package mcp/fixture) on a
// bare mcp-go Streamable HTTP server, without the node's stack. It exists to
// check the fixture against the official conformance suite on its own, and
// to compare with the node (`mcpswarm serve --conformance`).
//
// Usage: bareserver [-http 127.0.0.1:0] [-nop-event-store=true]
//
// It prints "listening on http://HOST:PORT/mcp" once it accepts connections,
// answers GET /healthz, and exits 0 on SIGTERM or SIGINT.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpswarm/mcpswarm/mcp/fixture"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bareserver:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("http", "127.0.0.1:0", "listen address")
	nop := flag.Bool("nop-event-store", true, "configure a no-op event store (avoids mcp-go's notification-loss race)")
	noGet := flag.Bool("disable-get", false, "answer GET /mcp with 405 (no standalone SSE stream)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	opts := append(fixture.ServerOptions(),
		server.WithPromptCompletionProvider(fixture.Completer{}),
		server.WithResourceCompletionProvider(fixture.Completer{}),
		server.WithRecovery())
	s := server.NewMCPServer("mcpswarm-fixture", "0.0.0", opts...)
	fixture.Register(s)

	httpOpts := []server.StreamableHTTPOption{server.WithSessionIdleTTL(5 * time.Minute)}
	if *nop {
		httpOpts = append(httpOpts, server.WithEventStore(&fixture.NopEventStore{}))
	}
	if *noGet {
		httpOpts = append(httpOpts, server.WithDisableStreaming(true))
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", server.NewStreamableHTTPServer(s, httpOpts...))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", *addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("listening on http://%s/mcp\n", ln.Addr())

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	slog.Info("shutting down")
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutting down: %w", err)
	}
	return nil
}
