package mcp

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mark3labs/mcp-go/server"
)

// metrics are the front's Prometheus metrics; with no Registerer they are
// still counted (so tests can read them) but not exported.
type metrics struct {
	calls        *prometheus.CounterVec
	elicitations *prometheus.CounterVec
	rejections   *prometheus.CounterVec
	notes        *prometheus.CounterVec
	direct       prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpswarm_mcp_tool_calls_total",
			Help: "Tool calls by kind (static, derived) and outcome."}, []string{"kind", "outcome"}),
		elicitations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpswarm_mcp_elicitations_total",
			Help: "Approval requests by outcome."}, []string{"outcome"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpswarm_mcp_rejected_requests_total",
			Help: "Requests refused before mcp-go, by reason."}, []string{"reason"}),
		notes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpswarm_mcp_notifications_total",
			Help: "Notifications sent by method."}, []string{"method"}),
		direct: prometheus.NewCounter(prometheus.CounterOpts{Name: "mcpswarm_mcp_direct_tool_calls_total",
			Help: "Streamable HTTP tool calls the front served past mcp-go's transport (directcall.go)."}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.calls, m.elicitations, m.rejections, m.notes, m.direct} {
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

// noopEventStore records nothing. Configuring any event store makes
// mcp-go's POST handler wait for its notification forwarder before writing
// the response, which is what keeps progress and log notifications sent
// just before a handler returns from being lost (upstream PR #969); we do
// not offer resumability, so no event is kept. mcp-go still keeps, until
// the connection ends, every POST stream whose answer it wrote as SSE (a
// resumable stream holding the POST's writer and request): the front keeps
// mcp-go from answering as SSE itself (see postroute.go).
type noopEventStore struct{}

func (noopEventStore) StoreEvent(context.Context, string, string, json.RawMessage) (string, error) {
	return "", nil
}

func (noopEventStore) ReplayEventsAfter(context.Context, string, string, func(string, json.RawMessage) error) (string, error) {
	return "", server.ErrUnknownEventID
}

func (noopEventStore) PurgeSession(context.Context, string) error { return nil }

var _ server.EventStore = noopEventStore{}
