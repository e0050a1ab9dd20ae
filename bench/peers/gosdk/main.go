// Command gosdk is the bench-compare peer built on the official
// github.com/modelcontextprotocol/go-sdk v1.8.0 with its default options: the
// same trivial "increment" tool as the mcp-go baseline, over Streamable HTTP
// at /mcp (and 200 at /healthz).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8091", "HTTP listen address")
	flag.Parse()
	if err := run(*addr); err != nil {
		fmt.Fprintln(os.Stderr, "gosdk:", err)
		os.Exit(1)
	}
}

// noArgs is the increment tool's (empty) input.
type noArgs struct{}

func run(addr string) error {
	var count atomic.Int64
	s := mcp.NewServer(&mcp.Implementation{Name: "bench-go-sdk", Version: "1.8.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "increment", Description: "Adds one to a counter and returns it."},
		func(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
			text := "count: " + strconv.FormatInt(count.Add(1), 10)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
		})
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	return serve(addr, mux)
}

// serve runs h on addr until SIGINT or SIGTERM, then shuts down gracefully.
func serve(addr string, h http.Handler) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving %s: %w", addr, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		slog.Warn("shutdown", "err", err)
	}
	return nil
}
