// Command balancer serves a round-robin reverse proxy with no stickiness in
// front of several HTTP backends, for end-to-end tests:
//
//	go run ./e2e/balancer/cmd -listen 127.0.0.1:8080 -backend 127.0.0.1:8081 -backend 127.0.0.1:8082
//
// It prints "balancer: listening on ADDR" once it accepts connections and
// stops on SIGINT or SIGTERM, printing how many requests each backend got.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/mcpswarm/mcpswarm/e2e/balancer"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "balancer:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	var backends list
	flag.Var(&backends, "backend", "backend host:port (repeat, or comma-separated)")
	flag.Parse()
	var hosts []string
	for _, b := range backends {
		hosts = append(hosts, strings.Split(b, ",")...)
	}
	rr, err := balancer.New(hosts)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", *listen, err)
	}
	srv := &http.Server{Handler: rr, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Printf("balancer: listening on %s\n", ln.Addr())
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serving: %w", err)
		}
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	fmt.Printf("balancer: requests per backend: %v\n", rr.Seen())
	return nil
}
