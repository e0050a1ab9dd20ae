package swarm

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics counts what the swarm routes. A nil *metrics records nothing.
type metrics struct {
	forwards *prometheus.CounterVec
	latency  prometheus.Histogram
	ackWait  *prometheus.HistogramVec
	// sessionAckWait is ackWait for session starts and tool-set changes.
	sessionAckWait *prometheus.HistogramVec
	// taskAckWait is ackWait for the task table's writes.
	taskAckWait *prometheus.HistogramVec
	// promotions counts standby copies this node took over (failover.go).
	promotions prometheus.Counter
	// handoffs counts the sessions this node's drains moved, by how.
	handoffs *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, s *Swarm) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		forwards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpswarm_swarm_forwards_total",
			Help: "Calls forwarded to the owning node, by outcome (ok, unavailable, timeout, refused, error).",
		}, []string{"outcome"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mcpswarm_swarm_forward_seconds",
			Help:    "Time of a forwarded call, from the entry node's request to the owner's answer.",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16),
		}),
		ackWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcpswarm_swarm_conn_ack_seconds",
			Help:    "Time a change to connection state waited for every live peer to apply it, by outcome (acked, lagging).",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16),
		}, []string{"outcome"}),
		promotions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpswarm_swarm_failovers_total",
			Help: "Sessions this node took over as their standby after their owner died.",
		}),
		handoffs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpswarm_swarm_handoffs_total",
			Help: "Sessions this node handed to another node while draining, by how: promoted (its standby took it over from its copy) or copied (its snapshot sent to the adopter).",
		}, []string{"how"}),
		sessionAckWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcpswarm_swarm_session_ack_seconds",
			Help:    "Time a session start or tool-set change waited for every live peer to apply it, by registry (sessions, tools) and outcome (acked, lagging).",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16),
		}, []string{"registry", "outcome"}),
		taskAckWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcpswarm_swarm_task_ack_seconds",
			Help:    "Time a task's creation, change or request waited for every live peer to apply it, by outcome (acked, lagging).",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16),
		}, []string{"outcome"}),
	}
	gauges := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mcpswarm_swarm_sessions_local",
			Help: "Sessions this node owns and runs.",
		}, func() float64 { return float64(len(s.mgr.List())) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mcpswarm_swarm_sessions_visible",
			Help: "Sessions visible in this node's replica of the swarm (owners alive).",
		}, func() float64 { return float64(len(s.idx.ids())) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mcpswarm_swarm_spent_request_states",
			Help: "Single-use 2026-07-28 request states this node holds (as one of their two holders, or replicated by the previous rule), until swept after expiry.",
		}, func() float64 { return float64(s.nonces.Len()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mcpswarm_swarm_connection_records",
			Help: "Connection records in this node's replica (every node's, revocations included).",
		}, func() float64 { return float64(s.conns.reg.Len()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mcpswarm_swarm_tasks",
			Help: "Tasks this node knows (every node's, finished ones until their TTL runs out).",
		}, func() float64 { return float64(s.tasks.len()) }),
	}
	// Both series exist from the start, so a drain's first handoff of
	// either kind shows as an increase from 0.
	m.handoffs.WithLabelValues("promoted")
	m.handoffs.WithLabelValues("copied")
	for _, c := range append(gauges, m.forwards, m.latency, m.ackWait, m.sessionAckWait, m.taskAckWait, m.promotions, m.handoffs) {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// forwarded records one forwarded call.
func (m *metrics) forwarded(began time.Time, err error) {
	if m == nil {
		return
	}
	m.latency.Observe(time.Since(began).Seconds())
	outcome := "ok"
	switch {
	case err == nil:
	case errors.Is(err, ErrOwnerUnavailable):
		outcome = "unavailable"
	case errors.Is(err, ErrMayHaveApplied):
		outcome = "timeout"
	case errors.Is(err, ErrNotOwner):
		outcome = "refused"
	default:
		outcome = "error"
	}
	m.forwards.WithLabelValues(outcome).Inc()
}

// connAck records how long a change to connection state waited for every
// live peer, and whether they all applied it in time.
func (m *metrics) connAck(d time.Duration, acked bool) {
	if m == nil {
		return
	}
	outcome := "acked"
	if !acked {
		outcome = "lagging"
	}
	m.ackWait.WithLabelValues(outcome).Observe(d.Seconds())
}

// sessionAck records how long a session start or tool-set change waited
// for every live peer to apply registry reg, and whether they all did.
func (m *metrics) sessionAck(reg string, d time.Duration, acked bool) {
	if m == nil {
		return
	}
	outcome := "acked"
	if !acked {
		outcome = "lagging"
	}
	m.sessionAckWait.WithLabelValues(reg, outcome).Observe(d.Seconds())
}

// taskAck records how long a task table write waited for every live peer
// to apply it, and whether they all did.
func (m *metrics) taskAck(d time.Duration, acked bool) {
	if m == nil {
		return
	}
	outcome := "acked"
	if !acked {
		outcome = "lagging"
	}
	m.taskAckWait.WithLabelValues(outcome).Observe(d.Seconds())
}

// handedOff counts one session a drain moved.
func (m *metrics) handedOff(how string) {
	if m != nil {
		m.handoffs.WithLabelValues(how).Inc()
	}
}
