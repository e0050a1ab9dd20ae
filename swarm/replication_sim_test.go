package swarm

// A deterministic simulation of session replication under random schedules
// of crashes (with or without the loss of the disk), partitions, heals and
// pauses, checked with a linearizability checker (porcupine) against the
// app's model, a counter.
//
// Real code: the standby side (standby.Holder over an in-memory Store that
// outlives the holder's process, standby.Service), the owner's side
// (standby.Shipper with its placement, standby.Place), the acknowledgement
// rule (standby.Verdict), the promotion rule (promotionVerdict) and the
// deaths count (deaths.majority), and cluster.RefusedConn.
//
// Modelled: the network (nodes in partition components; a call between
// nodes of one component arrives, one to a crashed node in the same
// component is refused, one across components times out, one to a paused
// node times out and is delivered when it resumes), membership as each node
// sees it (a peer it cannot reach is suspect at once and dead after
// simDetect ticks; a refused connection marks it gone), leases (a peer is
// fresh when heard within simLease ticks, simLease < simDetect),
// cluster.InMajority and cluster.InSync as lease.go counts them, session
// records (each owner publishes its sessions' records with their in-sync
// standbys; every tick each node pulls every record a reachable peer holds,
// so a record reaches the others one tick after it changed), the session
// (a counter, incremented by writes that return the new value, and read),
// its owner's journal (write(2) survives a crash, not the loss of the
// disk), routing (a client calls an entry node, which refuses unless
// cluster.InSync holds and forwards to the owner its records name), and
// demotion of an owner that sees a record of a later epoch.
//
// Everything runs on one goroutine but the Shipper's own, which the
// simulation waits for after each call, so a seed replays the same
// schedule.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpswarm/mcpswarm/cluster"
	standbyv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/standby/v1"
	"github.com/mcpswarm/mcpswarm/standby"
)

var simSchedules = flag.Int("sim.schedules", 1000, "random schedules TestReplicationHasOneHistory runs")
var simSeed = flag.Int64("sim.seed", 0, "run only this schedule seed (0: all)")
var simShow = flag.Int("sim.show", 2, "transcripts the survey prints per kind of failure")
var simRemember = flag.Bool("sim.remember", false, "a restarted node counts the members it knew before as dead until it hears them (a fix under study)")
var simFaults = flag.String("sim.faults", "one", "one: a fault (crash, pause, a node cut off) starts only while no node is faulty; any: faults overlap and partitions split the nodes at random")
var simSurvey = flag.Bool("sim.survey", false, "run every schedule and report the failing seeds, shortest transcript first")

const (
	simLease  = 2  // ticks a peer stays fresh after it was last heard
	simDetect = 4  // ticks of silence before a peer is declared dead
	simTicks  = 60 // ticks of random events per schedule
	simSettle = 12 // quiet ticks after the heal at the end
)

// TestReplicationHasOneHistory runs random schedules of crash, partition,
// heal and pause against the replication rules and checks, for every
// session, that the answered writes and reads are linearizable against a
// counter and that every node serves the same value once all is healed.
func TestReplicationHasOneHistory(t *testing.T) {
	n := *simSchedules
	if testing.Short() {
		n = min(n, 200)
	}
	seeds := make([]int64, 0, n)
	if *simSeed != 0 {
		seeds = append(seeds, *simSeed)
	} else {
		for i := range n {
			seeds = append(seeds, int64(i+1))
		}
	}
	start := time.Now()
	if *simSurvey {
		type fail struct {
			seed int64
			bad  string
			tr   string
		}
		var fails []fail
		for _, seed := range seeds {
			s := newSim(seed)
			s.run()
			if bad := s.check(); bad != "" {
				fails = append(fails, fail{seed, bad, s.transcript()})
			}
		}
		slices.SortFunc(fails, func(a, b fail) int { return len(a.tr) - len(b.tr) })
		kinds := map[string][]int64{}
		for _, f := range fails {
			kind := f.bad[strings.Index(f.bad, ":")+2 : strings.Index(f.bad, "(")]
			if len(kinds[kind]) < *simShow {
				t.Logf("seed %d: %s\n%s", f.seed, f.bad, f.tr)
			}
			kinds[kind] = append(kinds[kind], f.seed)
		}
		for k, seeds := range kinds {
			t.Logf("%s: %d schedules %v", k, len(seeds), seeds)
		}
		var ids []int64
		for _, f := range fails {
			ids = append(ids, f.seed)
		}
		t.Errorf("%d of %d schedules fail: %v", len(fails), len(seeds), ids)
		return
	}
	for _, seed := range seeds {
		s := newSim(seed)
		s.run()
		if bad := s.check(); bad != "" {
			t.Fatalf("schedule seed %d: %s\n(rerun: go test -run TestReplicationHasOneHistory -sim.seed %d ./swarm)\n%s", seed, bad, seed, s.transcript())
		}
	}
	t.Logf("%d schedules in %s (%.0f/s)", len(seeds), time.Since(start).Round(time.Millisecond), float64(len(seeds))/time.Since(start).Seconds())
}

// memStore is a node's standby journal on its disk: it survives the node's
// crash, not the loss of its disk.
type memStore struct{ m map[string][]byte }

func (s *memStore) Load(fn func(string, []byte) error) error {
	for _, k := range slices.Sorted(maps.Keys(s.m)) {
		if err := fn(k, s.m[k]); err != nil {
			return err
		}
	}
	return nil
}
func (s *memStore) Put(k string, v []byte) error { s.m[k] = slices.Clone(v); return nil }
func (s *memStore) Delete(k string) error        { delete(s.m, k); return nil }
func (s *memStore) Close() error                 { return nil }

// ownSnap is a session's snapshot in its owner's journal.
type ownSnap struct {
	Val   int    `json:"val"`
	Epoch uint64 `json:"epoch"`
}

type peerView struct {
	state     cluster.MemberState
	heard     int  // last tick heard (-1: never)
	silent    int  // first tick of the current silence (-1: not silent)
	gone      bool // its port refused a connection while the lease ran
	incarn    int  // the incarnation last seen
	refusedAt int
}

// partition is one origin incarnation's published records.
type partition struct {
	incarn  int
	version int
	recs    map[string]sessionRecord
}

type simNode struct {
	name   string
	up     bool
	paused bool
	incarn int

	// on disk
	holderDisk *memStore
	journal    map[string]ownSnap
	published  partition // this node's own records, restored on restart

	// in memory
	holder   *standby.Holder
	svc      *standby.Service
	ship     *standby.Shipper
	sessions map[string]*ownSnap
	view     map[string]*peerView
	deaths   deaths
	others   map[string]partition // other origins' records
	inbox    []func()             // work queued while paused
}

type sim struct {
	seed   int64
	rng    *rand.Rand
	now    int
	nodes  []*simNode
	byName map[string]*simNode
	group  map[string]int
	r      int
	ids    []string

	mu      sync.Mutex // guards queue: the Shipper's goroutines append
	queue   []msg
	pending sync.WaitGroup

	finalReads map[string]int
	diskLost   bool // a node lost its disk: at most one per schedule

	clock int64
	ops   map[string][]*simOp
	log   []string
}

// simOp is one client call; drop is set on a call that surely did not
// apply (refused before it changed anything) or a read never answered.
type simOp struct {
	porcupine.Operation
	drop bool
}

type msg struct {
	from, to string
	hold     *standbyv1.HoldRequest
	release  *standbyv1.ReleaseRequest
}

type counterIn struct {
	write bool
	what  string
}

// unknown marks the output of a write whose answer never came or was a
// refusal that may have applied.
const unknown = -1

func newSim(seed int64) *sim {
	rng := rand.New(rand.NewSource(seed))
	s := &sim{seed: seed, rng: rng, byName: map[string]*simNode{}, group: map[string]int{}, ops: map[string][]*simOp{}}
	n := 3 + rng.Intn(3)
	s.r = 1 + rng.Intn(2)
	if n == 3 {
		s.r = 1
	}
	for i := range n {
		nd := &simNode{name: fmt.Sprintf("n%d", i+1), holderDisk: &memStore{m: map[string][]byte{}}, journal: map[string]ownSnap{}}
		s.nodes = append(s.nodes, nd)
		s.byName[nd.name] = nd
	}
	s.logf("%d nodes, %d standbys per session, detect %d ticks, lease %d", n, s.r, simDetect, simLease)
	for _, nd := range s.nodes {
		s.start(nd)
	}
	for _, nd := range s.nodes {
		s.observe(nd)
	}
	for i := range 2 {
		id := fmt.Sprintf("s%d", i+1)
		s.ids = append(s.ids, id)
		owner := s.nodes[rng.Intn(n)]
		owner.sessions[id] = &ownSnap{Val: 0, Epoch: 1}
		owner.journal[id] = ownSnap{Val: 0, Epoch: 1}
		s.ship(owner, id)
		s.logf("session %s created on %s", id, owner.name)
	}
	return s
}

var simLog = slog.New(slog.DiscardHandler)

func discardLog() *slog.Logger { return simLog }

func (s *sim) logf(format string, args ...any) {
	s.log = append(s.log, fmt.Sprintf("t%-3d ", s.now)+fmt.Sprintf(format, args...))
}

func (s *sim) transcript() string { return strings.Join(s.log, "\n") }

// start boots nd from its disk under a new incarnation.
func (s *sim) start(nd *simNode) {
	nd.up, nd.paused = true, false
	nd.incarn++
	h, err := standby.NewHolder(nd.holderDisk, discardLog())
	if err != nil {
		panic(err)
	}
	nd.holder = h
	nd.svc = standby.NewService(h, func(ctx context.Context) string { c, _ := ctx.Value(simCaller{}).(string); return c })
	nd.ship = standby.NewShipper(standby.ShipperConfig{Replicas: s.r, Peers: simPeers{s, nd}, Logger: discardLog(),
		OnChange: func(id string) { s.publish(nd, id) }})
	nd.sessions = map[string]*ownSnap{}
	nd.deaths = deaths{}
	old := nd.view
	nd.view = map[string]*peerView{}
	if *simRemember {
		// The members it knew count as dead until heard again.
		for _, name := range slices.Sorted(maps.Keys(old)) {
			nd.view[name] = &peerView{state: cluster.StateDead, heard: 0, silent: s.now, incarn: old[name].incarn}
			nd.deaths.note(cluster.Member{Name: name, State: cluster.StateDead})
		}
	}
	nd.others = map[string]partition{}
	nd.inbox = nil
	for id, snap := range nd.journal {
		nd.sessions[id] = &ownSnap{Val: snap.Val, Epoch: snap.Epoch}
		nd.ship.Prime(id, snap.Epoch, encodeSnap(snap))
	}
	nd.published.incarn = nd.incarn
	nd.published.version++
}

type simCaller struct{}

func encodeSnap(v ownSnap) []byte {
	b, _ := json.Marshal(v)
	return b
}

func (s *sim) reachable(a, b *simNode) bool {
	return a.up && b.up && !a.paused && !b.paused && s.group[a.name] == s.group[b.name]
}

// simPeers is the cluster as one node's Shipper sees it.
type simPeers struct {
	s  *sim
	nd *simNode
}

func (p simPeers) Self() standby.Candidate { return standby.Candidate{Name: p.nd.name} }

func (p simPeers) Candidates() []standby.Candidate {
	var out []standby.Candidate
	for _, name := range slices.Sorted(maps.Keys(p.nd.view)) {
		if p.nd.view[name].state == cluster.StateAlive {
			out = append(out, standby.Candidate{Name: name})
		}
	}
	return out
}

func (p simPeers) Client(node string) (standbyv1.StandbyServiceClient, error) {
	p.s.pending.Add(1)
	return &simClient{s: p.s, from: p.nd, to: p.s.byName[node]}, nil
}

// simClient is one call from one node to another's standby service over
// the simulated network. It never blocks: a call that would time out
// returns DeadlineExceeded at once (and reaches a paused node later).
type simClient struct {
	s        *sim
	from, to *simNode
	once     sync.Once
}

func (c *simClient) done() { c.once.Do(c.s.pending.Done) }

func (c *simClient) Hold(ctx context.Context, req *standbyv1.HoldRequest, _ ...grpc.CallOption) (*standbyv1.HoldResponse, error) {
	defer c.done()
	switch {
	case c.s.group[c.from.name] != c.s.group[c.to.name]:
		return nil, status.Error(codes.DeadlineExceeded, "context deadline exceeded")
	case !c.to.up:
		return nil, status.Error(codes.Unavailable, "dial tcp: connect: connection refused")
	case c.to.paused:
		c.s.enqueue(msg{from: c.from.name, to: c.to.name, hold: req})
		return nil, status.Error(codes.DeadlineExceeded, "context deadline exceeded")
	}
	return c.to.svc.Hold(context.WithValue(ctx, simCaller{}, c.from.name), req)
}

func (c *simClient) Release(_ context.Context, req *standbyv1.ReleaseRequest, _ ...grpc.CallOption) (*standbyv1.ReleaseResponse, error) {
	defer c.done()
	c.s.enqueue(msg{from: c.from.name, to: c.to.name, release: req})
	return &standbyv1.ReleaseResponse{}, nil
}

func (s *sim) enqueue(m msg) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, m)
}

// settled waits for the Shipper's goroutines and orders what they queued.
func (s *sim) settled() {
	s.pending.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	sort.SliceStable(s.queue, func(i, j int) bool {
		a, b := s.queue[i], s.queue[j]
		if a.from != b.from {
			return a.from < b.from
		}
		return a.to < b.to
	})
}

// deliver hands queued calls to nodes that can take them now; a release
// to a node out of reach is lost, a hold waits for its paused target.
func (s *sim) deliver() {
	s.mu.Lock()
	q := s.queue
	s.queue = nil
	s.mu.Unlock()
	for _, m := range q {
		from, to := s.byName[m.from], s.byName[m.to]
		if !to.up || s.group[m.from] != s.group[m.to] {
			continue
		}
		if to.paused {
			s.enqueue(m)
			continue
		}
		ctx := context.WithValue(context.Background(), simCaller{}, from.name)
		if m.hold != nil {
			_, err := to.svc.Hold(ctx, m.hold)
			s.logf("late hold %s e%d/%d from %s reaches %s: %v", m.hold.Session, m.hold.Epoch, m.hold.Seq, m.from, m.to, errText(err))
		} else {
			_, _ = to.svc.Release(ctx, m.release)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// ship ships session id's state as nd holds it and returns the outcome.
func (s *sim) ship(nd *simNode, id string) standby.Outcome {
	snap := nd.sessions[id]
	out := nd.ship.Ship(context.Background(), id, snap.Epoch, encodeSnap(*snap))
	s.settled()
	s.publish(nd, id)
	return out
}

// publish writes nd's record of session id (or its removal).
func (s *sim) publish(nd *simNode, id string) {
	if nd.published.recs == nil {
		nd.published.recs = map[string]sessionRecord{}
	}
	snap, ok := nd.sessions[id]
	if !ok {
		if _, had := nd.published.recs[id]; had {
			delete(nd.published.recs, id)
			nd.published.version++
		}
		return
	}
	st, _ := nd.ship.Status(id)
	rec := sessionRecord{Node: nd.name, Handoff: snap.Epoch, Standbys: slices.Clone(st.InSync)}
	nd.published.recs[id] = rec
	nd.published.version++
}

// observe is one tick of nd's view: membership and leases from what it can
// reach, records pulled from every peer it reaches, then what the view
// changes (rebalance, demotion, failover).
func (s *sim) observe(nd *simNode) {
	if !nd.up || nd.paused {
		return
	}
	changed := false
	for _, p := range s.nodes {
		if p == nd {
			continue
		}
		v := nd.view[p.name]
		if v == nil {
			if !s.reachable(nd, p) {
				continue // never met: not a member yet
			}
			v = &peerView{state: cluster.StateDead, heard: -1, silent: -1}
			nd.view[p.name] = v
		}
		if s.reachable(nd, p) {
			if v.incarn != p.incarn {
				delete(nd.others, p.name) // a new incarnation: drop the old one's entries
				v.incarn = p.incarn
			}
			v.heard, v.silent, v.gone = s.now, -1, false
			if v.state != cluster.StateAlive {
				v.state = cluster.StateAlive
				nd.deaths.note(cluster.Member{Name: p.name, State: cluster.StateAlive})
				changed = true
			}
			continue
		}
		if v.silent < 0 {
			v.silent = s.now
		}
		if !p.up && s.group[nd.name] == s.group[p.name] && !v.gone && v.heard >= 0 {
			v.gone, v.refusedAt = true, s.now // its port refuses the replication stream
		}
		switch {
		case s.now-v.silent >= simDetect && v.state != cluster.StateDead:
			v.state = cluster.StateDead
			nd.deaths.note(cluster.Member{Name: p.name, State: cluster.StateDead})
			changed = true
		case v.state == cluster.StateAlive:
			v.state = cluster.StateSuspect
			changed = true
		}
	}
	// Records: every partition a reachable peer holds, newest wins.
	for _, p := range s.nodes {
		if p == nd || !s.reachable(nd, p) {
			continue
		}
		s.merge(nd, p.name, p.published)
		for o, part := range p.others {
			if o != nd.name {
				s.merge(nd, o, part)
			}
		}
	}
	if changed {
		nd.ship.Rebalance(context.Background())
		s.settled()
	}
	s.demoteSuperseded(nd)
	s.failover(nd)
}

func (s *sim) merge(nd *simNode, origin string, part partition) {
	have, ok := nd.others[origin]
	if v := nd.view[origin]; v != nil && v.incarn > part.incarn {
		return // an older incarnation than the one this node knows
	}
	if ok && (have.incarn > part.incarn || have.incarn == part.incarn && have.version >= part.version) {
		return
	}
	nd.others[origin] = partition{incarn: part.incarn, version: part.version, recs: maps.Clone(part.recs)}
}

func (nd *simNode) visible(origin string) bool {
	v := nd.view[origin]
	return v != nil && v.state == cluster.StateAlive
}

// locate returns the record of session id nd routes by (visible, latest
// epoch) and, when there is none, the latest record of a hidden origin.
func (s *sim) locate(nd *simNode, id string) (rec sessionRecord, visible bool, ok bool) {
	if snap, ok := nd.sessions[id]; ok {
		rec, visible = sessionRecord{Node: nd.name, Handoff: snap.Epoch}, true
	}
	var hidden sessionRecord
	haveHidden := false
	for _, o := range slices.Sorted(maps.Keys(nd.others)) {
		r, ok := nd.others[o].recs[id]
		if !ok {
			continue
		}
		if nd.visible(o) {
			if !visible || r.Handoff > rec.Handoff {
				rec, visible = r, true
			}
		} else if !haveHidden || r.Handoff > hidden.Handoff {
			hidden, haveHidden = r, true
		}
	}
	if visible {
		return rec, true, true
	}
	return hidden, false, haveHidden
}

func (s *sim) demoteSuperseded(nd *simNode) {
	for _, id := range slices.Sorted(maps.Keys(nd.sessions)) {
		rec, visible, ok := s.locate(nd, id)
		if ok && visible && rec.Node != nd.name && rec.Handoff > nd.sessions[id].Epoch {
			s.logf("%s demotes %s e%d: %s publishes e%d", nd.name, id, nd.sessions[id].Epoch, rec.Node, rec.Handoff)
			s.stop(nd, id)
		}
	}
}

func (s *sim) stop(nd *simNode, id string) {
	delete(nd.sessions, id)
	delete(nd.journal, id)
	nd.ship.Forget(id)
	s.settled()
	s.publish(nd, id)
}

func (s *sim) failover(nd *simNode) {
	for _, id := range s.ids {
		rec, visible, ok := s.locate(nd, id)
		if !ok || visible {
			continue
		}
		in := promotion{self: nd.name, rec: rec}
		in.heldOwner, in.heldEpoch, in.held = heldOf(nd.holder, id)
		_, in.running = nd.sessions[id]
		in.alive = func(n string) bool { return n == nd.name || nd.visible(n) }
		in.inSync = func() error { return s.inSync(nd) }
		in.majority = func() bool { return nd.deaths.majority(s.members(nd)) }
		if promotionVerdict(in) != promoteNow {
			continue
		}
		c, err := nd.holder.Promote(id)
		if err != nil {
			panic(err)
		}
		var snap ownSnap
		if err := json.Unmarshal(c.Snapshot, &snap); err != nil {
			panic(err)
		}
		snap.Epoch = c.Epoch + 1
		nd.sessions[id] = &snap
		nd.journal[id] = snap
		_ = nd.holder.Forget(id)
		out := s.ship(nd, id)
		s.logf("%s promotes %s (owner %s, standbys %v) at value %d under e%d; standbys now %v", nd.name, id, rec.Node, rec.Standbys, snap.Val, snap.Epoch, out.Acked)
	}
}

func heldOf(h *standby.Holder, id string) (string, uint64, bool) {
	c, ok := h.Get(id)
	return c.Owner, c.Epoch, ok
}

// members is nd's membership view as cluster.Members lists it.
func (s *sim) members(nd *simNode) []cluster.Member {
	out := []cluster.Member{{Name: nd.name, State: cluster.StateAlive, Self: true}}
	for _, name := range slices.Sorted(maps.Keys(nd.view)) {
		out = append(out, cluster.Member{Name: name, State: nd.view[name].state})
	}
	return out
}

// fresh reports whether nd heard from peer v within the lease.
func (s *sim) fresh(v *peerView) bool {
	return v.state == cluster.StateAlive && s.now-v.heard <= simLease
}

// goneInLease reports whether peer v's process went away while nd's lease
// on it ran: every write it answered reached nd.
func goneInLease(v *peerView) bool { return v.gone && v.refusedAt-v.heard <= simLease }

// inMajority is cluster.InMajority.
func (s *sim) inMajority(nd *simNode) error {
	total, fresh := 1, 1
	for _, v := range nd.view {
		if v.heard < 0 || goneInLease(v) {
			continue
		}
		total++
		if s.fresh(v) {
			fresh++
		}
	}
	if 2*fresh > total {
		return nil
	}
	return errors.New("not in the majority")
}

// inSync is cluster.InSync; a node pulls from every peer it reaches each
// tick, so it has caught up with its fresh peers.
func (s *sim) inSync(nd *simNode) error {
	fresh, gone := 0, 0
	for _, v := range nd.view {
		if v.heard < 0 || goneInLease(v) {
			continue
		}
		switch {
		case v.state == cluster.StateSuspect:
			return errors.New("a peer is suspect")
		case v.state == cluster.StateAlive && !s.fresh(v):
			return errors.New("a peer is stale")
		case v.state == cluster.StateAlive:
			fresh++
		default:
			gone++
		}
	}
	if gone > 0 && 1+fresh <= gone {
		return errors.New("cannot outvote the dead")
	}
	return nil
}

// down is cluster.Down: declared dead, or gone while the lease ran.
func (s *sim) down(nd *simNode, node string) bool {
	v := nd.view[node]
	return v == nil || v.state == cluster.StateDead || goneInLease(v)
}

func (s *sim) run() {
	for s.now = 1; s.now <= simTicks; s.now++ {
		s.event()
		s.tick()
	}
	// Heal, resume and restart everything, let failover settle, then read
	// every session through every node.
	s.logf("heal all, resume and restart every node")
	clear(s.group)
	for _, nd := range s.nodes {
		if !nd.up {
			s.start(nd)
		}
		if nd.paused {
			s.resume(nd)
		}
	}
	for range simSettle {
		s.now++
		s.tick()
	}
	s.finalReads = map[string]int{}
	for _, id := range s.ids {
		for _, nd := range s.nodes {
			if s.call(nd, id, false) {
				s.finalReads[id]++
			}
		}
	}
}

func (s *sim) tick() {
	s.deliver()
	for _, nd := range s.nodes {
		s.observe(nd)
	}
}

func (s *sim) event() {
	nd := s.nodes[s.rng.Intn(len(s.nodes))]
	// With -sim.faults=one, a fault starts only while no node is faulty:
	// crashed, paused or cut off.
	calm := *simFaults != "one" || !slices.ContainsFunc(s.nodes, s.faulty)
	switch x := s.rng.Intn(100); {
	case x < 55:
		s.call(nd, s.ids[s.rng.Intn(len(s.ids))], s.rng.Intn(4) != 0)
	case x < 63:
		if nd.up && calm {
			lose := s.rng.Intn(3) == 0 && !s.diskLost && s.coveredLoss(nd)
			s.diskLost = s.diskLost || lose
			s.crash(nd, lose)
		}
	case x < 73:
		if !nd.up {
			s.logf("%s restarts", nd.name)
			s.start(nd)
		}
	case x < 81:
		if !calm {
			break
		}
		for _, p := range s.nodes {
			if *simFaults == "one" {
				s.group[p.name] = 0
				if p == nd {
					s.group[p.name] = 1
				}
			} else {
				s.group[p.name] = s.rng.Intn(2)
			}
		}
		s.logf("partition %v", s.groups())
	case x < 89:
		clear(s.group)
		s.logf("heal")
	case x < 95:
		if nd.up && !nd.paused && calm {
			nd.paused = true
			s.logf("%s pauses", nd.name)
		}
	default:
		if nd.paused {
			s.resume(nd)
		}
	}
}

// faulty reports whether nd is crashed, paused or cut off from the first
// side of a partition.
func (s *sim) faulty(nd *simNode) bool { return !nd.up || nd.paused || s.group[nd.name] != 0 }

func (s *sim) groups() string {
	var sides [2][]string
	for _, nd := range s.nodes {
		sides[s.group[nd.name]] = append(sides[s.group[nd.name]], nd.name)
	}
	return fmt.Sprint(sides[0], " | ", sides[1])
}

// coveredLoss reports whether nd may lose its disk without losing an
// acknowledged write: every session it runs has a standby holding its
// newest state. Losing more than that is beyond what the contract
// promises.
func (s *sim) coveredLoss(nd *simNode) bool {
	for id := range nd.journal {
		st, ok := nd.ship.Status(id)
		if !ok || len(st.InSync) == 0 {
			return false
		}
	}
	return true
}

func (s *sim) crash(nd *simNode, loseDisk bool) {
	nd.up, nd.paused = false, false
	_ = nd.holder.Close()
	nd.sessions, nd.inbox = nil, nil
	if loseDisk {
		nd.holderDisk = &memStore{m: map[string][]byte{}}
		nd.journal = map[string]ownSnap{}
		nd.published = partition{}
		nd.view = nil // what it knew of the members was on the disk too
		s.logf("%s crashes and loses its disk", nd.name)
		return
	}
	s.logf("%s crashes", nd.name)
}

func (s *sim) resume(nd *simNode) {
	nd.paused = false
	s.logf("%s resumes", nd.name)
	inbox := nd.inbox
	nd.inbox = nil
	for _, work := range inbox {
		work()
	}
}

// call is one client call to session id through entry node nd: a write
// (increment, answered with the new value) or a read.
func (s *sim) call(nd *simNode, id string, write bool) (answered bool) {
	if !nd.up || nd.paused {
		return false
	}
	what := "read"
	if write {
		what = "write"
	}
	if err := s.inSync(nd); err != nil {
		s.logf("%s %s via %s refused: %v", what, id, nd.name, err)
		return false
	}
	rec, visible, ok := s.locate(nd, id)
	if !ok || !visible {
		s.logf("%s %s via %s: owner unavailable", what, id, nd.name)
		return false
	}
	owner := s.byName[rec.Node]
	if owner != nd && !s.reachable(nd, owner) && !(owner.up && owner.paused && s.group[nd.name] == s.group[owner.name]) {
		s.logf("%s %s via %s: owner %s unreachable", what, id, nd.name, owner.name)
		return false
	}
	s.clock++
	op := &simOp{Operation: porcupine.Operation{ClientId: len(s.ops[id]), Input: counterIn{write: write, what: fmt.Sprintf("%s via %s", what, nd.name)}, Call: s.clock, Output: unknown, Return: 1 << 62}}
	op.drop = !write // a read never answered says nothing
	s.ops[id] = append(s.ops[id], op)
	work := func(late bool) {
		out, answer := s.serve(owner, id, write)
		if late {
			s.logf("(late) %s %s at %s: %s", what, id, owner.name, answer)
			return // the client gave up long ago: its answer stays unknown
		}
		s.clock++
		switch {
		case out >= 0:
			op.Output, op.Return, op.drop = out, s.clock, false
		case answer == "not applied":
			op.drop = true
		}
		s.logf("%s %s via %s at %s: %s", what, id, nd.name, owner.name, answer)
		answered = out >= 0
	}
	if owner.paused {
		owner.inbox = append(owner.inbox, func() { work(true) })
		s.logf("%s %s via %s waits on paused owner %s", what, id, nd.name, owner.name)
		return false
	}
	work(false)
	return answered
}

// serve runs a call at node owner: its value (unknown when the answer
// is not ok) and how it was answered.
func (s *sim) serve(owner *simNode, id string, write bool) (int, string) {
	snap, ok := owner.sessions[id]
	if !ok {
		return unknown, "not applied"
	}
	if !write {
		return snap.Val, fmt.Sprintf("%d", snap.Val)
	}
	snap.Val++
	owner.journal[id] = *snap
	out := s.ship(owner, id)
	a, why := standby.Verdict(out, func(node string, why error) bool {
		return cluster.RefusedConn(why) || s.down(owner, node)
	}, func() error { return s.inMajority(owner) })
	switch a {
	case standby.Replicated, standby.Alone, standby.Degraded:
		return snap.Val, fmt.Sprintf("%d (%s e%d, acked by %v)", snap.Val, a, snap.Epoch, out.Acked)
	case standby.Demoted:
		s.stop(owner, id)
		return unknown, "not applied"
	}
	return unknown, fmt.Sprintf("%s (%v)", a, why)
}

// check runs porcupine on each session's history and compares the final
// reads; it returns what is wrong, or "".
func (s *sim) check() string {
	for _, id := range s.ids {
		var ops, writes []porcupine.Operation
		for _, op := range s.ops[id] {
			if op.drop {
				continue
			}
			ops = append(ops, op.Operation)
			if op.Input.(counterIn).write {
				writes = append(writes, op.Operation)
			}
		}
		if res := porcupine.CheckOperationsTimeout(counterModel, writes, 10*time.Second); res != porcupine.Ok {
			return fmt.Sprintf("session %s: the writes fork (%s):\n%s", id, res, describe(ops))
		}
		if res := porcupine.CheckOperationsTimeout(counterModel, ops, 10*time.Second); res != porcupine.Ok {
			return fmt.Sprintf("session %s: a read is stale (%s):\n%s", id, res, describe(ops))
		}
	}
	return ""
}

func describe(ops []porcupine.Operation) string {
	var b strings.Builder
	for _, op := range ops {
		ret := "never"
		if op.Return < 1<<62 {
			ret = fmt.Sprint(op.Return)
		}
		fmt.Fprintf(&b, "  [%d..%s] %s -> %v\n", op.Call, ret, op.Input.(counterIn).what, op.Output)
	}
	return b.String()
}

// counterModel is the app: a counter whose writes add one and answer the
// new value, and whose reads answer the value.
var counterModel = porcupine.Model{
	Init: func() any { return 0 },
	Step: func(state, input, output any) (bool, any) {
		v, in, out := state.(int), input.(counterIn), output.(int)
		if in.write {
			return out == unknown || out == v+1, v + 1
		}
		return out == v, v
	},
	DescribeOperation: func(input, output any) string {
		return fmt.Sprintf("%s -> %v", input.(counterIn).what, output)
	},
}
