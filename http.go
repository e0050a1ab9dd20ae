package mcpswarm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// whileServing answers 503 with Retry-After until the node serves clients:
// HTTP starts before the swarm has published the sessions restored from the
// data dir, and a request in that window would act on a session the rest of
// the node does not know yet. The same answer covers shutdown, once the
// swarm has stopped publishing. Health, readiness and metrics stay outside.
func (n *Node) whileServing(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !n.serving.Load() {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "node "+n.cfg.Name+" is not serving yet (restoring its sessions) or is stopping; retry", http.StatusServiceUnavailable)
			return
		}
		if !n.cluster.Settled() {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "node "+n.cfg.Name+" has not been in sync with a majority of the members it knows since it started (a restart counts those its last run knew until it hears them); retry", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func promhttpHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// readyzBody is what /readyz answers: whether the node serves, and the
// members it sees, so `curl /readyz` shows the cluster at a glance.
type readyzBody struct {
	Ready   bool           `json:"ready"`
	Node    string         `json:"node"`
	Reason  string         `json:"reason,omitempty"`
	Members []readyzMember `json:"members,omitempty"`
}

type readyzMember struct {
	Name  string `json:"name"`
	State string `json:"state"`
}

func (n *Node) serveReadyz(w http.ResponseWriter, _ *http.Request) {
	body := readyzBody{Node: n.cfg.Name, Ready: true, Members: n.readyMembers()}
	status := http.StatusOK
	if err := n.readiness(); err != nil {
		body.Ready, body.Reason = false, err.Error()
		status = http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// gaugeByLabel reads a gauge vector from the node's registry, by the value
// of one label (e.g. replication lag by peer), for the web UI.
func gaugeByLabel(reg *prometheus.Registry, name, label string) map[string]float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return nil
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && m.GetGauge() != nil {
					out[lp.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}

// newHTTPServer builds the HTTP server with the node's limits: a client
// that does not send its headers, or its body, in time loses its
// connection, and so does one idle for IdleTimeout. Responses have no
// write timeout: SSE streams are long-lived by design and are kept alive by
// pings, not bounded by a deadline.
func (n *Node) newHTTPServer() *http.Server {
	l := n.cfg.HTTP
	return &http.Server{
		Handler:           bodyDeadline(l.BodyTimeout, n.mux),
		ReadHeaderTimeout: l.HeaderTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(n.log.Handler(), slog.LevelWarn),
	}
}

// limitListeners puts the HTTP and gRPC listeners under their connection
// caps (see HTTPLimits and fdBudget) and logs the caps once.
func (n *Node) limitListeners() error {
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpswarm_conns_refused_total",
		Help: "Connections closed on accept because they were over a cap, by listener and cap (per_source, total).",
	}, []string{"listener", "cap"})
	if err := n.metrics.Register(refused); err != nil {
		return fmt.Errorf("registering connection-cap metrics: %w", err)
	}
	nofile := openFileLimit()
	httpTotal, grpcTotal := fdBudget(nofile)
	if n.cfg.HTTP.MaxConns > 0 {
		httpTotal = n.cfg.HTTP.MaxConns
	}
	log := n.log.With("component", "listeners")
	n.httpLn = newCapListener(n.httpLn, "http", n.cfg.HTTP.ConnsPerSource, httpTotal, n.cfg.Dev, refused, log)
	n.grpcLn = newCapListener(n.grpcLn, "grpc", grpcConnsPerSource, grpcTotal, n.cfg.Dev, refused, log)
	log.Info("connection caps", "open_files_limit", nofile,
		"http_total", httpTotal, "http_per_source", n.cfg.HTTP.ConnsPerSource,
		"grpc_total", grpcTotal, "grpc_per_source", grpcConnsPerSource)
	return nil
}

// bodyDeadline bounds the time a client may take to send a request body:
// http.Server's ReadTimeout cannot, since it also ends long-lived SSE
// responses (its deadline stays on the connection and cancels the request
// when the server's background read hits it). The deadline is lifted as
// soon as the body has been read.
func bodyDeadline(d time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(d)); err == nil {
			r.Body = &deadlineBody{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the read deadline once the body is read to its end.
// On any other error the deadline stays: the server then fails to drain
// the rest of the body too, and closes the connection.
type deadlineBody struct {
	io.ReadCloser
	once sync.Once
	lift func()
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	k, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.once.Do(b.lift)
	}
	return k, err
}
