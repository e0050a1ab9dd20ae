package cluster

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/mcpswarm/mcpswarm/crdt"
	peerv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/peer/v1"
)

// replicator pushes this node's deltas to every peer and runs anti-entropy.
// Its state is owned by run, a single goroutine with one select loop (as
// raft's node.run); other goroutines hand it work through wake, the view's
// changed channel and events.
type replicator struct {
	c   *Cluster
	log *slog.Logger

	pmu     sync.Mutex
	pending []pendingWrite
	flushed map[string]uint64 // own seq per registry handed to every link
	wake    chan struct{}     // cap 1: pending is non-empty

	events chan func() // work to run on the loop

	ackMu sync.Mutex
	ackCh chan struct{} // closed at the next acknowledgement (acked.go)

	leases *leases // lease.go
	// beatPair: this node advertises CapBeatPair (beatpair.go).
	beatPair bool
	beat     *beat // the streams' one heartbeat clock (beat.go)

	linksMu sync.Mutex
	links   map[string]*link // by member name; written by the loop only

	wg sync.WaitGroup // link senders and syncs

	// Owned by run.
	ctx    context.Context
	known  map[string]crdt.Origin    // the origin last reconciled per name
	graves map[crdt.Origin]time.Time // hidden because dead or departed, since
	rng    *rand.Rand
	aeBusy bool
	// catchUpAt is when every live peer is next to be pulled from because
	// a member was lost (zero: not due); see lostMember.
	catchUpAt time.Time

	// activity counts own writes queued and remote changes applied, ever:
	// anti-entropy rounds stretch while it stands still (pace.go).
	activity atomic.Uint64
}

func newReplicator(c *Cluster) *replicator {
	return &replicator{
		c: c, log: c.log,
		wake:     make(chan struct{}, 1),
		leases:   newLeases(&c.syncGen),
		beatPair: ownCapabilities(c.cfg).Has(CapBeatPair),
		beat:     newBeat(c.cfg.Clock, heartbeatEvery(c.cfg)),
		flushed:  map[string]uint64{},
		events:   make(chan func(), 256),
		links:    map[string]*link{},
		known:    map[string]crdt.Origin{},
		graves:   map[crdt.Origin]time.Time{},
		rng:      rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	}
}

// local queues an own delta for the next push. The caller holds the
// registry's lock, which keeps the deltas of a registry in order. It never
// blocks on peers.
func (r *replicator) local(registry string, d crdt.Delta) {
	if d.IsEmpty() && d.From == d.To {
		return
	}
	r.pmu.Lock()
	r.pending = append(r.pending, pendingWrite{registry: registry, delta: d, at: time.Now()})
	r.pmu.Unlock()
	r.activity.Add(1)
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// post runs fn on the loop; it gives up when the loop has stopped.
func (r *replicator) post(ctx context.Context, fn func()) {
	select {
	case r.events <- fn:
	case <-ctx.Done():
	}
}

// run is the replication loop. A nil channel disables its case: batchC is
// nil while no batch is being collected.
func (r *replicator) run(ctx context.Context) {
	r.ctx = ctx
	defer r.beat.stop() // after the streams ended (deferred calls run last first)
	defer r.wg.Wait()
	batch := time.NewTimer(time.Hour)
	batch.Stop()
	var batchC <-chan time.Time
	// Anti-entropy and the dead grace run on the cluster's clock (tests
	// drive them); the batch delay stays on wall time, so writes flush
	// without anybody moving a clock.
	clock := r.c.cfg.Clock
	ae := clock.NewTimer(0) // the first round runs at once
	defer ae.Stop()
	pace := newAEPace(r.c.cfg)
	// A change the loop sees brings the short anti-entropy period back.
	woken := func() {
		if pace.wake() {
			ae.Reset(r.jitter(r.c.cfg.AntiEntropy))
		}
	}
	// The pull from every live peer after a loss runs at catchUpAt.
	catchUp := clock.NewTimer(time.Hour)
	catchUp.Stop()
	defer catchUp.Stop()
	var catchUpC <-chan time.Time
	armCatchUp := func() {
		if r.catchUpAt.IsZero() {
			return
		}
		if d := r.catchUpAt.Sub(clock.Now()); d > 0 {
			catchUp.Reset(d)
			catchUpC = catchUp.Chan()
			return
		}
		r.catchUpAt, catchUpC = time.Time{}, nil
		r.pullAll()
	}
	// Expiry runs only while some origin is hidden.
	graves := lazyTicker{clock: clock, every: max(min(r.c.cfg.DeadGrace/10, time.Second), 20*time.Millisecond)}
	defer graves.set(false)
	r.reconcile()
	graves.set(len(r.graves) > 0)
	armCatchUp()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
			if batchC == nil {
				batch.Reset(r.c.cfg.BatchDelay)
				batchC = batch.C
			}
		case <-batchC:
			batchC = nil
			r.flush()
			woken()
		case <-r.c.view.changed:
			r.reconcile()
			graves.set(len(r.graves) > 0)
			armCatchUp()
			woken()
		case <-catchUpC:
			catchUpC = nil
			armCatchUp()
		case now := <-ae.Chan():
			ticks, next := pace.round(now, r.activity.Load())
			ae.Reset(r.jitter(next))
			r.tick(ticks)
		case now := <-graves.C():
			r.expire(now)
			graves.set(len(r.graves) > 0)
		case fn := <-r.events:
			fn()
		}
	}
}

// jitter spreads d by ±25 %.
func (r *replicator) jitter(d time.Duration) time.Duration {
	return d*3/4 + time.Duration(r.rng.Int64N(int64(d)/2+1))
}

// flush sends the pending deltas as one or more batches to every peer's
// queue. A full queue drops the batch for that peer only; the peer finds the
// gap at the next batch or heartbeat and catches up.
func (r *replicator) flush() {
	r.pmu.Lock()
	pend := r.pending
	r.pending = nil
	r.pmu.Unlock()
	if len(pend) == 0 {
		return
	}
	r.linksMu.Lock()
	alone := len(r.links) == 0
	r.linksMu.Unlock()
	if alone {
		// Nobody to send to: no batch is built (merging and encoding were
		// a lone node's whole replication cost on every write). A link
		// made later learns these positions from heartbeats and catches
		// up from storage, as one made just after a flush always did.
		r.pmu.Lock()
		for _, p := range pend {
			r.flushed[p.registry] = max(r.flushed[p.registry], p.delta.To)
		}
		r.pmu.Unlock()
		return
	}
	for _, b := range r.batches(pend) {
		r.linksMu.Lock()
		for _, l := range r.links {
			l.enqueue(b)
		}
		r.linksMu.Unlock()
		// Only now may heartbeats announce these positions: the batch is
		// already ahead of them in every queue.
		r.pmu.Lock()
		for reg, to := range b.tos {
			r.flushed[reg] = max(r.flushed[reg], to)
		}
		r.pmu.Unlock()
	}
}

// batches merges consecutive deltas of each registry and cuts requests at
// a quarter of the message limit.
func (r *replicator) batches(pend []pendingWrite) []*batch {
	limit := r.c.cfg.MaxMessageBytes / 4
	var out []*batch
	cur := &batch{tos: map[string]uint64{}}
	curSize := 0
	var run []crdt.Delta
	runReg := ""
	runSize := 0
	emit := func() {
		if len(run) == 0 {
			return
		}
		d, err := crdt.MergeAll(run)
		if err != nil {
			// Deltas of one registry are queued in order, so this is a bug;
			// push them unmerged rather than lose them.
			r.log.Error("merging own deltas", slog.String("registry", runReg), slog.String("reason", err.Error()))
			for _, d := range run {
				cur.deltas = append(cur.deltas, deltaToPB(runReg, d))
			}
		} else {
			cur.deltas = append(cur.deltas, deltaToPB(runReg, d))
		}
		cur.tos[runReg] = max(cur.tos[runReg], run[len(run)-1].To)
		curSize += runSize
		run, runSize = nil, 0
		if curSize >= limit {
			out = append(out, cur)
			cur = &batch{tos: map[string]uint64{}}
			curSize = 0
		}
	}
	for _, p := range pend {
		sz := deltaSize(p.delta)
		if p.registry != runReg || runSize+sz > limit {
			emit()
			runReg = p.registry
		}
		if cur.since.IsZero() || p.at.Before(cur.since) {
			cur.since = p.at
		}
		run = append(run, p.delta)
		runSize += sz
	}
	emit()
	if len(cur.deltas) > 0 {
		out = append(out, cur)
	}
	for _, b := range out {
		// The stream's first message (a position) names the sender.
		b.req = &peerv1.ReplicateRequest{Deltas: b.deltas}
		b.size = proto.Size(b.req)
		b.count = len(b.deltas)
		b.deltas = nil
	}
	return out
}

func deltaSize(d crdt.Delta) int {
	n := 16
	for _, p := range d.Puts {
		n += len(p.Key) + len(p.Value) + 8
	}
	for _, rm := range d.Removes {
		n += len(rm.Key) + 8
	}
	return n
}

// reconcile brings links, hidden origins and graves in line with the view.
func (r *replicator) reconcile() {
	now := r.c.cfg.Clock.Now()
	seen := map[string]bool{}
	for _, m := range r.c.view.list() {
		if m.Self {
			continue
		}
		seen[m.Name] = true
		if prev, ok := r.known[m.Name]; ok && prev != m.Origin && prev.Epoch < m.Origin.Epoch {
			r.log.Info("dropping replaced origin", slog.String("old", prev.String()), slog.String("new", m.Origin.String()))
			r.eachRegistry(func(cm *crdt.Map) { cm.Drop(prev) })
			delete(r.graves, prev)
			r.closeLink(m.Name, prev)
		}
		r.known[m.Name] = m.Origin
		switch {
		case m.State.live():
			delete(r.graves, m.Origin)
			r.readmit(m.Origin)
			if m.GRPCAddr != "" {
				r.ensureLink(m)
			}
			o := m.Origin
			if m.State == StateSuspect {
				r.leases.setHidden(o, true)
				r.eachRegistry(func(cm *crdt.Map) { cm.Hide(o) })
			} else {
				r.eachRegistry(func(cm *crdt.Map) { cm.Unhide(o) })
				r.leases.setHidden(o, false) // once shown again (lease.go)
			}
		default:
			if m.State == StateLeft {
				r.leases.found(m.Name)
			}
			r.closeLink(m.Name, m.Origin)
			if _, ok := r.graves[m.Origin]; !ok {
				o := m.Origin
				r.graves[o] = now
				r.lostMember(o)
				r.log.Info("hiding entries of "+m.State.String()+" member", slog.String("origin", o.String()))
				r.leases.setHidden(o, true)
				r.eachRegistry(func(cm *crdt.Map) { cm.Hide(o) })
			}
		}
	}
	for name, o := range r.known {
		if !seen[name] {
			delete(r.known, name)
			r.closeLink(name, o)
		}
	}
	r.updateLag()
}

// lostMember schedules a pull from every live peer for when this node's
// lease on lost member o has lapsed (at once if it has). InSync lets a node
// act after a death only once it has pulled from every member it hears
// from since that lapse (lease.go): the dead member's last writes may have
// reached only them. Left to anti-entropy, which pulls from one random
// peer per round (1 s apart with DefaultConfig), that catch-up added about
// a second to every failover. The pull starts a millisecond after the
// lapse, so its start is strictly later. Loop only.
func (r *replicator) lostMember(o crdt.Origin) {
	lapse, ok := r.leases.lapse(o, r.c.cfg.Lease)
	if !ok {
		return
	}
	if due := lapse.Add(time.Millisecond); due.After(r.catchUpAt) {
		r.catchUpAt = due
	}
}

// pullAll pulls everything from every linked peer. Loop only.
func (r *replicator) pullAll() {
	r.linksMu.Lock()
	ls := make([]*link, 0, len(r.links))
	for _, l := range r.links {
		ls = append(ls, l)
	}
	r.linksMu.Unlock()
	for _, l := range ls {
		r.startSync(l, false)
	}
}

// readmit accepts again the data of an origin whose entries were deleted
// after its grace and which membership now reports alive with the same
// epoch (a long partition healed): without it the maps refused its data for
// their whole drop memory, about a minute with DefaultConfig.
func (r *replicator) readmit(o crdt.Origin) {
	back := false
	r.eachRegistry(func(cm *crdt.Map) {
		if cm.Readmit(o) {
			back = true
		}
	})
	if back {
		r.log.Info("readmitting origin that came back after its grace", slog.String("origin", o.String()))
	}
}

// expire deletes the entries of origins hidden for longer than DeadGrace.
func (r *replicator) expire(now time.Time) {
	for o, since := range r.graves {
		if now.Sub(since) < r.c.cfg.DeadGrace {
			continue
		}
		delete(r.graves, o)
		r.log.Info("deleting entries of dead origin", slog.String("origin", o.String()), slog.Duration("hidden", now.Sub(since)))
		if m, ok := r.c.view.get(o.Name); ok && m.Epoch == o.Epoch && m.State == StateDead {
			r.leases.lose(o, r.c.cfg.Lease)
		}
		r.eachRegistry(func(cm *crdt.Map) { cm.Drop(o) })
		r.c.view.forget(o)
		if r.known[o.Name] == o {
			delete(r.known, o.Name)
		}
	}
}

// eachRegistry runs fn on every registry's map and delivers the changes.
func (r *replicator) eachRegistry(fn func(*crdt.Map)) {
	for _, reg := range r.c.registries() {
		reg.with(fn)
	}
}

// tick advances the maps' logical clocks by ticks and runs one
// anti-entropy round with a random live peer.
func (r *replicator) tick(ticks int) {
	for range ticks {
		r.eachRegistry(func(cm *crdt.Map) { cm.Tick() })
	}
	r.updateLag()
	r.c.Settled() // a node with no peer to pull from is in sync too
	if r.aeBusy {
		return
	}
	r.linksMu.Lock()
	cands := make([]*link, 0, len(r.links))
	for _, l := range r.links {
		cands = append(cands, l)
	}
	r.linksMu.Unlock()
	if len(cands) == 0 {
		// Ready only when alone: a node that has joined but not yet
		// linked its peers has nothing synced, and a rolling restart
		// would route clients to it before it knows their sessions.
		if !r.c.hasLivePeers() {
			r.c.aeDone.Store(true)
		}
		return
	}
	l := cands[r.rng.IntN(len(cands))]
	r.aeBusy = true
	r.c.metrics.antiEntropy.Inc()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		err := r.syncWith(r.ctx, l, false)
		if err == nil {
			l.synced.Store(true)
		}
		r.post(r.ctx, func() {
			r.aeBusy = false
			if err == nil {
				r.c.aeDone.Store(true)
			}
		})
	}()
}

// requestSync asks the loop to pull from the peer named name; ownOnly limits
// the pull to the peer's own origin. Safe from any goroutine.
func (r *replicator) requestSync(name string, ownOnly bool) {
	ctx := r.ctx
	if ctx == nil {
		return
	}
	r.post(ctx, func() {
		r.linksMu.Lock()
		l := r.links[name]
		r.linksMu.Unlock()
		if l != nil {
			r.startSync(l, ownOnly)
		}
	})
}

// startSync runs one pull from l unless one is running; then it runs
// another when that one ends. Loop only.
func (r *replicator) startSync(l *link, ownOnly bool) {
	if l.syncing {
		l.again = true
		l.againAll = l.againAll || !ownOnly
		return
	}
	l.syncing = true
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		if err := r.syncWith(r.ctx, l, ownOnly); err == nil {
			l.synced.Store(true)
		}
		r.post(r.ctx, func() {
			l.syncing = false
			if l.again && !l.closed() {
				all := l.againAll
				l.again, l.againAll = false, false
				r.startSync(l, !all)
			}
		})
	}()
}

// ensureLink opens (or keeps) the link to member m. Loop only.
func (r *replicator) ensureLink(m Member) {
	r.linksMu.Lock()
	l := r.links[m.Name]
	r.linksMu.Unlock()
	if l != nil && l.origin == m.Origin && l.addr == m.GRPCAddr {
		return
	}
	if l != nil {
		r.closeLink(m.Name, l.origin)
	}
	l, err := r.dial(m)
	if err != nil {
		r.log.Warn("dialing peer", slog.String("peer", m.Origin.String()), slog.String("addr", m.GRPCAddr), slog.String("reason", err.Error()))
		return
	}
	r.linksMu.Lock()
	r.links[m.Name] = l
	r.linksMu.Unlock()
	r.wg.Add(1)
	go func() { defer r.wg.Done(); r.send(l) }()
	// The owner is the best source of its own origin. After a member was
	// lost, InSync wants everything from each peer: a node back from a
	// partition pulls it at once, not at anti-entropy's pace.
	r.startSync(l, !r.leases.catchingUp())
}

// closeLink closes the link to name if it serves origin o. Loop only.
func (r *replicator) closeLink(name string, o crdt.Origin) {
	r.linksMu.Lock()
	l := r.links[name]
	if l == nil || l.origin != o {
		r.linksMu.Unlock()
		return
	}
	delete(r.links, name)
	r.linksMu.Unlock()
	l.close()
	r.c.metrics.lag.DeleteLabelValues(name)
}

// closeLinks closes every link; called after the loop has stopped.
func (r *replicator) closeLinks() {
	r.linksMu.Lock()
	links := r.links
	r.links = map[string]*link{}
	r.linksMu.Unlock()
	for _, l := range links {
		l.close()
	}
}

// conn returns the client connection to origin o, or nil.
func (r *replicator) conn(o crdt.Origin) *grpc.ClientConn {
	r.linksMu.Lock()
	defer r.linksMu.Unlock()
	if l := r.links[o.Name]; l != nil && l.origin == o {
		return l.cc
	}
	return nil
}

// connNow asks the loop to reconcile at once and returns the connection to
// m's origin, or nil after a second.
func (r *replicator) connNow(m Member) *grpc.ClientConn {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	done := make(chan struct{})
	r.post(ctx, func() { r.reconcile(); close(done) })
	select {
	case <-done:
	case <-ctx.Done():
	}
	return r.conn(m.Origin)
}

// updateLag sets each peer's lag: own sequence numbers it has not
// acknowledged, over all registries.
func (r *replicator) updateLag() {
	own := map[string]uint64{}
	for _, reg := range r.c.registries() {
		own[reg.name] = reg.seq(r.c.origin)
	}
	r.linksMu.Lock()
	defer r.linksMu.Unlock()
	for name, l := range r.links {
		r.c.metrics.lag.WithLabelValues(name).Set(float64(l.lag(own)))
	}
}

// accept decides whether data of origin o may be applied when it arrives
// from the peer whose origin is via. The owner itself (o == via) is trusted
// for its own data unless the view knows a newer epoch of its name. A relay
// is accepted only for a member of the view with that very epoch. While the
// view says the origin is dead or gone the data lands in its hidden
// partition: a dead owner's last records may have reached only the peers
// that relay them, and a standby must read them before it takes over
// (Registry.OnHiddenChange); the map's drop memory, and the view forgetting
// the origin after its grace, keep them from coming back later. It returns
// the reason when not.
func (c *Cluster) accept(o, via crdt.Origin) (bool, string) {
	if o.Name == c.origin.Name {
		return false, "own origin"
	}
	m, ok := c.view.get(o.Name)
	switch {
	case ok && m.Epoch > o.Epoch:
		return false, "superseded origin"
	case o == via:
		return true, ""
	case ok && m.Epoch == o.Epoch:
		return true, ""
	}
	return false, "unknown origin"
}

// hideIfGone hides origin o's partition of cm before data of o is applied
// when the view says o is suspect, dead or gone: a relay can bring a dead
// origin's data before the replication loop hid it here (or after its
// partition was deleted), and it must not show. The caller holds cm's lock.
func (c *Cluster) hideIfGone(cm *crdt.Map, o crdt.Origin) {
	if m, ok := c.view.get(o.Name); ok && m.Epoch == o.Epoch && (!m.State.live() || m.State == StateSuspect) {
		cm.Hide(o)
	}
}
