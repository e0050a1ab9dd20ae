package mcpswarm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/mcpswarm/mcpswarm/authz"
)

// validDebugAddr accepts only a loopback address for --debug-addr: the
// profiles show every session's data and the endpoints are unauthenticated,
// so they must not be reachable from the network.
func validDebugAddr(addr string) error {
	if err := validAddr(addr); err != nil {
		return err
	}
	if loop, err := authz.IsLoopback(addr); err != nil || !loop {
		return fmt.Errorf("%q is not a loopback address: the profiling endpoint is unauthenticated, so it binds to 127.0.0.1 or ::1 only", addr)
	}
	return nil
}

// serveDebug serves net/http/pprof on its own loopback listener when
// --debug-addr is set (off by default), for heap profiles of a running node
// (bench/soak takes them before and after its load).
func (n *Node) serveDebug() component {
	var srv *http.Server
	return component{
		name: "debug",
		start: func(context.Context) error {
			ln, err := listen("debug-addr", n.cfg.DebugAddr)
			if err != nil {
				return err
			}
			mux := http.NewServeMux()
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
			srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
			n.debugLn = ln
			go func() {
				if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
					n.log.Warn("debug listener failed", "err", err)
				}
			}()
			n.log.Info("profiling endpoint enabled", "addr", ln.Addr().String())
			return nil
		},
		stop: func(context.Context) error {
			if srv == nil {
				return nil
			}
			return srv.Close()
		},
	}
}

// DebugAddr is the bound --debug-addr address, or "" when it is off.
func (n *Node) DebugAddr() string {
	if n.debugLn == nil {
		return ""
	}
	return n.debugLn.Addr().String()
}
