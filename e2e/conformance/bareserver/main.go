// Command bareserver serves the conformance fixture (package mcp/fixture) on a
// bare mcp-go Streamable HTTP server, without the node's stack. It exists to
// check the fixture against the official conformance suite on its own, and
// to compare with the node (`mcpswarm serve --conformance`).
//
// Usage: bareserver [-http 127.0.0.1:0] [-nop-event-store=true] [-request-streams=true] [-disable-get]
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
	perRequest := flag.Bool("request-streams", true, "send a request's notifications on its own POST stream (see streams.go)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	mux := http.NewServeMux()
	mux.Handle("/mcp", newHandler(options{nopEventStore: *nop, disableGet: *noGet, requestStreams: *perRequest}))
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

// options selects how the fixture is served.
type options struct {
	nopEventStore  bool // configure fixture.NopEventStore
	disableGet     bool // answer GET /mcp with 405
	requestStreams bool // a request's notifications go to its own POST stream
}

// newHandler serves the fixture at /mcp on a bare mcp-go Streamable HTTP server.
func newHandler(o options) http.Handler {
	hooks := &server.Hooks{}
	if o.requestStreams {
		finishHooks(hooks)
	}
	opts := append(fixture.ServerOptions(),
		server.WithPromptCompletionProvider(fixture.Completer{}),
		server.WithResourceCompletionProvider(fixture.Completer{}),
		server.WithHooks(hooks),
		server.WithRecovery())
	s := server.NewMCPServer("mcpswarm-fixture", "0.0.0", opts...)
	fixture.Register(s)

	httpOpts := []server.StreamableHTTPOption{server.WithSessionIdleTTL(5 * time.Minute)}
	if o.requestStreams {
		httpOpts = append(httpOpts, server.WithHTTPContextFunc(requestSessions(s)))
	}
	if o.nopEventStore {
		httpOpts = append(httpOpts, server.WithEventStore(&fixture.NopEventStore{}))
	}
	if o.disableGet {
		httpOpts = append(httpOpts, server.WithDisableStreaming(true))
	}
	var h http.Handler = server.NewStreamableHTTPServer(s, httpOpts...)
	if o.requestStreams {
		h = postStreams(h)
	}
	return h
}
