package mcpswarm

import (
	"encoding/json"
	"net/http"

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
