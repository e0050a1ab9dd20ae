package mcpswarm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/internal/coalesce"
	"github.com/mcpswarm/mcpswarm/journal"
	standbyv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/standby/v1"
	"github.com/mcpswarm/mcpswarm/session"
	"github.com/mcpswarm/mcpswarm/standby"
	"github.com/mcpswarm/mcpswarm/swarm"
)

// standbyDir is where a node keeps the copies it holds for other owners,
// under the data dir, apart from its own sessions' journal.
const standbyDir = "standby"

// ErrFenced is the cause of a write refused because a standby did not
// acknowledge it and the owner cannot rule out that it is the one cut off
// (the standby is not known down, or the owner is not in the cluster's
// majority), so it must not answer on its own. The call may be retried.
var ErrFenced = errors.New("a standby did not acknowledge the update and the owner cannot rule out being cut off from the cluster's majority")

// ErrDemoted is the cause of a write refused because a standby holds the
// session under a later ownership epoch: another node took it over.
var ErrDemoted = errors.New("another node took this session over")

// replicas is the node's side of session standbys: the copies it holds for
// other owners (holder), and the shipping of its own sessions' snapshots
// to their standbys (ship, nil when the node keeps one copy).
type replicas struct {
	holder *standby.Holder
	ship   *standby.Shipper
	// quorum reports whether this node is in the cluster's majority and
	// caught up (cluster.InSync): the rule that lets an owner answer a
	// write none of its standbys acknowledged.
	quorum func() error
	// down reports whether a member is known not to be running
	// (cluster.Down).
	down func(node string) bool
	log  *slog.Logger
	// mgr and sw are set once they exist; demote and republish use them.
	mu  sync.Mutex
	mgr *session.Manager
	sw  *swarm.Swarm
	// retry kicks the rebalance again while a moved standby waits for its
	// release (retire); closed stops it from being armed again.
	retry  *time.Timer
	closed bool

	degraded prometheus.Counter
	kick     coalesce.Signal
	stop     chan struct{}
	done     chan struct{}
}

// openReplicas opens the standby journal under dataDir and, with
// replicas > 0, the shipper of this node's own sessions.
func openReplicas(dataDir string, c *cluster.Cluster, n int, reg prometheus.Registerer, log *slog.Logger) (*replicas, error) {
	h, err := standby.OpenHolder(filepath.Join(dataDir, standbyDir), log)
	if err != nil {
		return nil, err
	}
	r := &replicas{holder: h, quorum: c.InMajority, down: c.Down, log: log, kick: coalesce.NewSignal(), stop: make(chan struct{}), done: make(chan struct{})}
	ackWait := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "mcpswarm_standby_ack_seconds",
		Help:    "How long a write to a session with standbys waited for their acknowledgements: the replication lag of an in-sync standby.",
		Buckets: []float64{.0002, .0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1},
	})
	if n > 0 {
		r.ship = standby.NewShipper(standby.ShipperConfig{Replicas: n, Peers: clusterPeers{c}, Logger: log, OnChange: r.republish,
			Observe: func(d time.Duration) { ackWait.Observe(d.Seconds()) }})
	}
	r.degraded = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "mcpswarm_standby_unreplicated_writes_total",
		Help: "Writes to sessions that have standbys answered on the owner's own durability (fsync) because a standby did not acknowledge in time.",
	})
	held := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "mcpswarm_standby_copies",
		Help: "Session copies this node holds as a standby for other owners.",
	}, func() float64 { return float64(len(h.Copies())) })
	for _, m := range []prometheus.Collector{r.degraded, held, ackWait, shippingCollector{r.ship}} {
		if err := reg.Register(m); err != nil {
			_ = h.Close()
			return nil, fmt.Errorf("registering standby metrics: %w", err)
		}
	}
	c.AddService(func(s grpc.ServiceRegistrar) {
		svc := standby.NewService(h, cluster.PeerName)
		standbyv1.RegisterStandbyServiceServer(s, svc)
		standbyv1.RegisterStandbyStreamServiceServer(s, svc.Streams())
	})
	// Membership changes move placements: ship again where a standby
	// left or a better one came (coalesced, so a rolling restart's
	// burst of changes ships once).
	go func() {
		defer close(r.done)
		coalesce.Run(r.stop, r.kick, 50*time.Millisecond, func() {
			if r.ship != nil {
				r.ship.Rebalance(context.Background())
				if !r.retire() {
					r.retryIn(retireRetry)
				}
			}
		})
	}()
	c.WatchMembers(func(cluster.Member) { r.kick.Kick() })
	return r, nil
}

// attach hands r the session manager and swarm once they exist.
func (r *replicas) attach(mgr *session.Manager, sw *swarm.Swarm) {
	r.mu.Lock()
	r.mgr, r.sw = mgr, sw
	r.mu.Unlock()
}

// republish makes the swarm publish session id's record again, with its
// in-sync standbys as they are now.
func (r *replicas) republish(id string) {
	r.mu.Lock()
	sw := r.sw
	r.mu.Unlock()
	if sw != nil {
		sw.StandbysChanged(id)
	}
}

// alone reports whether this node ships its sessions' snapshots and no
// other member could stand by for them: a write now would find no standby
// placed and be answered on this node's own fsync.
func (r *replicas) alone() bool { return r.ship != nil && r.ship.Alone() }

// replicate ships a saved snapshot (b, already written to the owner's
// journal j, and fsynced there if synced) to the session's standbys and
// decides how the write is answered: when every placed standby holds it;
// on the owner's own fsync when none is placed (a lone node) or one
// missed it while this node is in the majority; refused when it is not
// (fenced) or when a standby holds a later epoch (demoted).
func (r *replicas) replicate(id string, epoch uint64, b []byte, j *journal.Journal, synced bool) error {
	if r.ship == nil {
		return nil
	}
	out := r.ship.Ship(context.Background(), id, epoch, b)
	a, why := standby.Verdict(out, r.knownDown, r.quorum)
	switch a {
	case standby.Demoted:
		r.demote(id)
		return fmt.Errorf("session %s: %w (%v); calls now reach the new owner", id, ErrDemoted, why)
	case standby.Fenced:
		return fmt.Errorf("session %s: %w: %v", id, ErrFenced, why)
	}
	// A standby a peer's record may still name lacks this write (it left
	// the in-sync set, or the placement moved): the record as it is now
	// must reach every live peer first, so that standby cannot take the
	// session over without the write.
	if len(out.Unconfirmed) > 0 {
		if err := r.publishStandbys(id); err != nil {
			return fmt.Errorf("session %s: %w: the record that drops standby %v did not reach every peer (%v)", id, ErrFenced, out.Unconfirmed, err)
		}
	}
	switch a {
	case standby.Replicated:
		return nil
	case standby.Degraded:
		r.degraded.Inc()
	}
	if synced {
		return nil
	}
	return j.Sync()
}

// publishStandbys makes every live peer hold the records of sessions ids
// with their in-sync sets as they are now, within the standby
// acknowledgement bound, and tells the shipper each was confirmed.
func (r *replicas) publishStandbys(ids ...string) error {
	r.mu.Lock()
	sw := r.sw
	r.mu.Unlock()
	if sw == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), standby.DefaultAckTimeout)
	defer cancel()
	published := make([][]string, len(ids))
	for i, id := range ids {
		published[i] = r.InSync(id)
	}
	err := sw.PublishStandbys(ctx, ids...)
	// A peer known down cannot take anything over; when it comes back, it
	// is a new incarnation that reads the record before it may act.
	var lag *cluster.LaggingError
	if errors.As(err, &lag) && !slices.ContainsFunc(lag.Peers, func(p string) bool { return !r.down(p) }) {
		err = nil
	}
	if err == nil {
		for i, id := range ids {
			r.ship.Confirmed(id, published[i])
		}
	}
	return err
}

// retireRetry is how soon retire tries again after a try whose records did
// not reach every peer (a peer just back from a partition answers late).
const retireRetry = time.Second

// retire confirms the records of sessions whose placement moved, so the
// standbys they no longer name are released (Shipper.Retiring). It reports
// whether none is left waiting: the caller tries again later, since no
// membership change or write may come to do it (a moved standby would
// otherwise keep its copy, and a dead owner's record could still name it).
func (r *replicas) retire() bool {
	ids := r.ship.Retiring()
	if len(ids) == 0 {
		return true
	}
	if err := r.publishStandbys(ids...); err != nil {
		r.log.Debug("moved standbys keep their copies until the records that drop them reach every peer", "sessions", len(ids), "err", err)
		return false
	}
	return true
}

// retryIn kicks the rebalance again after d, unless r is closing.
func (r *replicas) retryIn(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if r.retry == nil {
		r.retry = time.AfterFunc(d, r.kick.Kick)
		return
	}
	r.retry.Reset(d)
}

// knownDown reports whether a standby that missed a write (with why) is
// known not to be running: its port refused us, or the cluster knows it
// down (cluster.Down).
func (r *replicas) knownDown(node string, why error) bool {
	return cluster.RefusedConn(why) || r.down(node)
}

// demote stops this node's copy of a session another node took over. It
// runs apart from the session's goroutine, which called replicate and
// must return before the session can stop.
func (r *replicas) demote(id string) {
	r.mu.Lock()
	mgr, sw := r.mgr, r.sw
	r.mu.Unlock()
	if mgr == nil {
		return
	}
	// Until the new owner's record reaches this node, a call answers a
	// retryable "taken over", not "not running", which would send the
	// client off to start a new session.
	if info, ok := mgr.Get(id); ok && sw != nil {
		sw.Superseded(id, info.Principal)
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := mgr.Stop(ctx, id); err != nil && !errors.Is(err, session.ErrNotRunning) {
			r.log.Warn("stopping a session another node took over", "session", id, "err", err)
			return
		}
		r.log.Warn("demoted: another node owns this session under a later epoch; stopped the local copy", "session", id)
	}()
}

// forget releases a stopped session's standbys.
func (r *replicas) forget(id string) {
	if r.ship != nil {
		r.ship.Forget(id)
	}
}

// prime records a restored session's snapshot, so the next rebalance
// ships it to its standbys without waiting for an update.
func (r *replicas) prime(id string, epoch uint64, b []byte) {
	if r.ship != nil {
		r.ship.Prime(id, epoch, b)
		r.kick.Kick()
	}
}

func (r *replicas) close() error {
	r.mu.Lock()
	r.closed = true
	if r.retry != nil {
		r.retry.Stop()
	}
	r.mu.Unlock()
	close(r.stop)
	<-r.done
	if r.ship != nil {
		r.ship.Close()
	}
	return r.holder.Close()
}

// The swarm's view of the standbys (swarm.Standbys).

// InSync implements swarm.Standbys.
func (r *replicas) InSync(id string) []string {
	if r.ship == nil {
		return nil
	}
	st, _ := r.ship.Status(id)
	return st.InSync
}

// CatchUp implements swarm.Standbys.
func (r *replicas) CatchUp(ctx context.Context, id string) {
	if r.ship != nil {
		r.ship.Resync(ctx, id)
	}
}

// Behind implements swarm.Standbys.
func (r *replicas) Behind(id string) map[string]time.Time {
	if r.ship == nil {
		return nil
	}
	st, _ := r.ship.Status(id)
	if len(st.Behind) == 0 {
		return nil
	}
	now := time.Now()
	out := make(map[string]time.Time, len(st.Behind))
	for node, lag := range st.Behind {
		out[node] = now.Add(-lag.For)
	}
	return out
}

// Held implements swarm.Standbys.
func (r *replicas) Held(id string) (owner string, epoch uint64, ok bool) {
	c, ok := r.holder.Get(id)
	return c.Owner, c.Epoch, ok
}

// Promote implements swarm.Standbys.
func (r *replicas) Promote(id string) (session.Snapshot, func(), error) {
	c, err := r.holder.Promote(id)
	if err != nil {
		return session.Snapshot{}, nil, err
	}
	var snap session.Snapshot
	if err := json.Unmarshal(c.Snapshot, &snap); err != nil {
		r.holder.Unpromote(c)
		return session.Snapshot{}, nil, fmt.Errorf("decoding the standby copy of %s: %w", id, err)
	}
	snap.Info.Handoff = c.Epoch + 1
	return snap, func() { r.holder.Unpromote(c) }, nil
}

// Promoted implements swarm.Standbys.
func (r *replicas) Promoted(id string) {
	if err := r.holder.Forget(id); err != nil {
		r.log.Warn("dropping a promoted standby copy", "session", id, "err", err)
	}
}

var _ swarm.Standbys = (*replicas)(nil)

// shippingCollector reports, at each scrape, the in-sync sets and lag of
// the standbys of this node's own sessions.
type shippingCollector struct{ ship *standby.Shipper }

var (
	inSyncDesc = prometheus.NewDesc("mcpswarm_standby_sessions",
		"Sessions this node owns, by how many of their standbys hold their newest snapshot (in_sync=\"0\" with replicas configured: answered on the owner's own durability).",
		[]string{"in_sync"}, nil)
	lagDesc = prometheus.NewDesc("mcpswarm_standby_lag_updates",
		"The most updates any standby of this node's sessions lacks (0 when every placed standby is in sync).", nil, nil)
)

func (c shippingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- inSyncDesc
	ch <- lagDesc
}

func (c shippingCollector) Collect(ch chan<- prometheus.Metric) {
	var sum standby.Summary
	if c.ship != nil {
		sum = c.ship.Summary()
	}
	for k, v := range sum.ByInSync {
		ch <- prometheus.MustNewConstMetric(inSyncDesc, prometheus.GaugeValue, float64(v), strconv.Itoa(k))
	}
	ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(sum.MaxLag))
}

// clusterPeers is the cluster as a standby.Shipper sees it.
type clusterPeers struct{ c *cluster.Cluster }

func (p clusterPeers) Self() standby.Candidate {
	m := p.c.Self()
	return standby.Candidate{Name: m.Name, Zone: m.Capabilities.Zone()}
}

// Candidates are the alive members that serve the standby service:
// neither draining nor suspect, nor a node of a release without it.
func (p clusterPeers) Candidates() []standby.Candidate {
	var out []standby.Candidate
	for _, m := range p.c.Members() {
		if m.State == cluster.StateAlive && m.Capabilities.Has(cluster.CapStandby) {
			out = append(out, standby.Candidate{Name: m.Name, Zone: m.Capabilities.Zone()})
		}
	}
	return out
}

func (p clusterPeers) Client(node string) (standbyv1.StandbyServiceClient, error) {
	cc, err := p.c.PeerConn(node)
	if err != nil {
		return nil, err
	}
	return standbyv1.NewStandbyServiceClient(cc), nil
}

func (p clusterPeers) StreamClient(node string) (standbyv1.StandbyStreamServiceClient, any, error) {
	cc, err := p.c.PeerConn(node)
	if err != nil {
		return nil, nil, err
	}
	return standbyv1.NewStandbyStreamServiceClient(cc), cc, nil
}

var _ standby.StreamPeers = clusterPeers{}
