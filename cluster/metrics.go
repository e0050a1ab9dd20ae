package cluster

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the cluster's Prometheus collectors. They exist even without a
// Registerer, so the code never checks for nil.
type metrics struct {
	members        *prometheus.GaugeVec   // state
	lag            *prometheus.GaugeVec   // peer
	deltasSent     prometheus.Counter     //
	deltasRecv     prometheus.Counter     //
	bytesSent      prometheus.Counter     //
	bytesRecv      prometheus.Counter     //
	catchUps       *prometheus.CounterVec // role: client|server
	snapshots      *prometheus.CounterVec // role: client|server
	antiEntropy    prometheus.Counter     //
	convergence    prometheus.Histogram   //
	queueDrops     prometheus.Counter     //
	rejected       *prometheus.CounterVec // reason
	suspects       prometheus.Counter     //
	streamRestarts prometheus.Counter     //
	heartbeats     *prometheus.CounterVec // event: sent|answered
	beatsSent      prometheus.Counter     // heartbeats{event="sent"}
	beatsAnswered  prometheus.Counter     // heartbeats{event="answered"}
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns, sub = "mcpswarm", "cluster"
	m := &metrics{
		members: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "members",
			Help: "Members in the view by state (alive, suspect, draining, dead, left)."}, []string{"state"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "replication_lag",
			Help: "Own-origin sequence numbers a peer has not yet acknowledged, summed over registries."}, []string{"peer"}),
		deltasSent: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "deltas_sent_total",
			Help: "Deltas sent to peers (push and catch-up)."}),
		deltasRecv: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "deltas_received_total",
			Help: "Deltas received from peers (push and catch-up)."}),
		bytesSent: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "bytes_sent_total",
			Help: "Encoded bytes of replication messages sent."}),
		bytesRecv: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "bytes_received_total",
			Help: "Encoded bytes of replication messages received."}),
		catchUps: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "catchups_total",
			Help: "Catch-up calls made (client) and served (server)."}, []string{"role"}),
		snapshots: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "snapshots_total",
			Help: "Per-origin snapshots received and committed (client) or streamed (server)."}, []string{"role"}),
		antiEntropy: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "anti_entropy_rounds_total",
			Help: "Digest exchanges initiated."}),
		convergence: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "convergence_seconds",
			Help:    "Time from a local write to its acknowledgement by a peer.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		queueDrops: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "queue_drops_total",
			Help: "Batches dropped because a peer's queue was full (repaired by catch-up)."}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "rejected_total",
			Help: "Peer input refused or ignored, by reason."}, []string{"reason"}),
		suspects: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "suspects_total",
			Help: "Times a peer alive in memberlist was marked suspect because its gRPC calls failed."}),
		streamRestarts: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "stream_restarts_total",
			Help: "Replicate streams re-opened after a failure."}),
		heartbeats: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "heartbeats_total",
			Help: "Heartbeats (positions) sent on Replicate streams, and answers to them received; between beat-pair peers one stream of a pair heartbeats."}, []string{"event"}),
	}
	m.beatsSent = m.heartbeats.WithLabelValues("sent")
	m.beatsAnswered = m.heartbeats.WithLabelValues("answered")
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.members, m.lag, m.deltasSent, m.deltasRecv, m.bytesSent, m.bytesRecv,
		m.catchUps, m.snapshots, m.antiEntropy, m.convergence, m.queueDrops, m.rejected, m.suspects, m.streamRestarts, m.heartbeats} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
