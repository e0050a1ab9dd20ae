package mcp

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the front's Prometheus metrics; with no Registerer they are
// still counted (so tests can read them) but not exported.
type metrics struct {
	calls        *prometheus.CounterVec
	elicitations *prometheus.CounterVec
	rejections   *prometheus.CounterVec
	notes        *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpswarm_mcp_tool_calls_total",
			Help: "Tool calls by kind (static, derived) and outcome."}, []string{"kind", "outcome"}),
		elicitations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpswarm_mcp_elicitations_total",
			Help: "Approval requests by outcome."}, []string{"outcome"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpswarm_mcp_rejected_requests_total",
			Help: "Requests refused before they reached a method, by reason."}, []string{"reason"}),
		notes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpswarm_mcp_notifications_total",
			Help: "Notifications sent by method."}, []string{"method"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.calls, m.elicitations, m.rejections, m.notes} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("registering mcp metrics: %w", err)
			}
		}
	}
	return m, nil
}

func (m *metrics) call(kind, outcome string) { m.calls.WithLabelValues(kind, outcome).Inc() }
func (m *metrics) elicitation(o outcome)     { m.elicitations.WithLabelValues(o.String()).Inc() }
func (m *metrics) rejected(reason string)    { m.rejections.WithLabelValues(reason).Inc() }
func (m *metrics) notified(method string)    { m.notes.WithLabelValues(method).Inc() }
