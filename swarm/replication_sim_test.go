package swarm

// A deterministic simulation of session replication under random schedules
// of crashes (with or without the loss of the disk), partitions, heals and
// pauses, checked with a linearizability checker (porcupine) against the
// app's model, a counter whose writes answer the new value.
//
// Real code: the standby side (standby.Holder over an in-memory Store that
// outlives the holder's process, standby.Service), the owner's side
// (standby.Shipper with its placement, standby.Place), the acknowledgement
// rule (standby.Verdict), the promotion rule (promotionVerdict) with the
// deaths count (deaths.majority), and cluster.RefusedConn.
//
// Modelled: the network (nodes in partition components; a call within a
// component arrives, one to a crashed node of the same component is
// refused, one across components times out, one to a paused node times
// out and is delivered when it resumes), membership as each node sees it
// (a peer it cannot reach is suspect at once and dead after simDetect
// ticks; a refused connection while the lease ran marks it gone), leases
// (a peer is fresh when heard within simLease < simDetect ticks),
// cluster.InMajority, cluster.InSync and cluster.Down as lease.go counts
// them, session records (each owner publishes its sessions' records with
// their in-sync standbys; every tick a node pulls every record a reachable
// peer holds, relayed ones only of an origin it knows with that
// incarnation, a dead one's into its hidden partition, as cluster.accept;
// a node keeps other origins' records in memory only, its own on disk),
// replicas.publishStandbys (before it answers with a standby Unconfirmed,
// the owner pushes its record to every live peer, or refuses unless the
// peers it misses are known down), the session and its owner's journal
// (write(2) survives a crash, not the loss of the disk), a restart
// (cluster.Start joins the peers it reaches before the node serves its
// restored sessions, and counts the members it knew as dead until it
// hears them), routing (the entry node refuses unless
// cluster.InSync holds, and forwards to the owner its visible records
// name), demotion of an owner that holds a record of a later epoch,
// visible or hidden (Swarm.onHiddenSessionChange), and failover of hidden
// owners' sessions each tick from the record of the latest epoch. Time
// runs in ticks of one to three events each; views change at the end of a
// tick, so a call can meet a view a fault has just made stale.
//
// A write answered ok has the value it answered; one refused as fenced or
// never answered may or may not have applied (porcupine places it
// anywhere after its call); one refused before it applied, or as demoted
// ("not applied here"), did not. A node loses its disk at most once per
// schedule, and only while each session it runs has an in-sync standby
// (the contract covers the loss of one node, not of every copy).
//
// The property is the issue's: a session's writes and the reads every node
// answers once all is healed form one linearizable history. Reads during
// the schedule are answered from the owner's memory, fenced or not, and
// are checked only with -sim.reads.
//
// -sim.faults lists the kinds of schedule run (both by default). one, the
// contract (any one node): a fault (crash, pause, one node cut off) starts
// only while no node is faulty and the last one ended simRecover ticks
// ago. seq drops the recovery time, so a fault may follow another before
// the cluster settled (a machine lost just after a blip). any lets faults
// overlap and partitions split the nodes at random: past the contract, it
// still forks (-sim.survey lists the seeds by kind).
//
// Everything runs on the test's goroutine but the Shipper's own, which the
// simulation waits for after each call, so a seed replays the same
// schedule.

import (
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/mcpswarm/mcpswarm/cluster"
	standbyv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/standby/v1"
	"github.com/mcpswarm/mcpswarm/standby"
)

var simSchedules = flag.Int("sim.schedules", 2000, "random schedules TestReplicationHasOneHistory runs")
var simSeed = flag.Int64("sim.seed", 0, "run only this schedule seed (0: all)")
var simShow = flag.Int("sim.show", 2, "transcripts the survey prints per kind of failure")
var simReads = flag.Bool("sim.reads", false, "check the reads made during the schedule too (an owner answers them from memory, fenced or not)")
var simFaults = flag.String("sim.faults", "one,seq", "the kinds of schedule, comma-separated; one: a fault (crash, pause, one node cut off) starts only while no node is faulty and the last fault ended simRecover ticks ago; seq: as one, without the recovery time; any: faults overlap and partitions split the nodes at random")
var simSurvey = flag.Bool("sim.survey", false, "run every schedule and report the failing seeds, shortest transcript first")

// simRegressions are schedules that found a fork once.
var simRegressions = []struct {
	why   string
	cfg   simConfig
	seeds []int64
}{{
	why:   "a restarted owner's standby took its snapshots, numbered from 1 again, for duplicates (TestARestartedOwnersSnapshotReplacesItsEarlierRunsCopy)",
	cfg:   simConfig{faults: "one"},
	seeds: []int64{639, 6210},
}, {
	why:   "the placement moved to a standby that came back and the owner answered before the record that drops the old standby reached the peers (TestAStandbyLeftBehindStaysUnconfirmedUntilTheRecordIsConfirmed)",
	cfg:   simConfig{faults: "seq"},
	seeds: []int64{1107, 1532, 5357, 5698},
}, {
	why:   "a standby cut off while its owner moved the session elsewhere came back after the owner died and promoted its stale copy: relays of a dead owner's last record were refused (TestAStaleStandbyThatComesBackAfterItsOwnerDiedDoesNotPromote)",
	cfg:   simConfig{faults: "seq"},
	seeds: []int64{9692, 5754, 9290, 4193, 5461},
}, {
	why:   "an old owner cut off during a promotion kept serving after the new owner died at the heal, because it demoted only on a visible record of the later epoch",
	cfg:   simConfig{faults: "seq"},
	seeds: []int64{1974, 9748},
}}

// TestReplicationForksFoundStayFixed replays the schedules that found a
// fork once.
func TestReplicationForksFoundStayFixed(t *testing.T) {
	for _, r := range simRegressions {
		for _, seed := range r.seeds {
			s := newSim(seed, r.cfg)
			s.run()
			if bad := s.check(); bad != "" {
				t.Errorf("seed %d (%s), which once found that %s: %s\n%s", seed, r.cfg, r.why, bad, s.transcript())
			}
		}
	}
}

// TestReplicationSimReplays checks that a seed replays the same schedule,
// so a failing seed's transcript can be studied and rerun.
func TestReplicationSimReplays(t *testing.T) {
	run := func() string {
		s := newSim(9632, simConfig{faults: "one"})
		s.run()
		return s.transcript()
	}
	if a, b := run(), run(); a != b {
		t.Fatalf("seed 9632 ran two different schedules:\n%s\n---\n%s", a, b)
	}
}

const (
	simLease  = 2  // ticks a peer stays fresh after it was last heard
	simDetect = 4  // ticks of silence before a peer is declared dead
	simTicks  = 40 // ticks of random events per schedule
	simSettle = 12 // quiet ticks after the heal at the end
	// simRecover is how long -sim.faults=one waits after a fault ended
	// before the next may start: the lost node is heard again, its
	// records pulled, placements rebalanced.
	simRecover = simDetect + simLease
)

// TestReplicationHasOneHistory runs random schedules of crash, partition,
// heal and pause against the replication rules and checks, for every
// session, that its answered writes and the reads every node answers once
// all is healed are linearizable against a counter: one history, which
// every node serves. 10,000 schedules:
// go test -run TestReplicationHasOneHistory ./swarm -args -sim.schedules=10000
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
	for _, faults := range strings.Split(*simFaults, ",") {
		cfg := flagConfig()
		cfg.faults = faults
		t.Run(faults, func(t *testing.T) { runSchedules(t, seeds, cfg) })
	}
}

func runSchedules(t *testing.T, seeds []int64, cfg simConfig) {
	start := time.Now()
	if *simSurvey {
		survey(t, seeds, cfg)
		return
	}
	// What the schedules exercised, so a pass is not vacuous.
	seen := map[string]int{}
	events := []string{" promotes ", " demotes ", "(replicated", "(alone", "(degraded", ": fenced", ": not applied", "late hold", "loses its disk", " pauses", "partition "}
	for _, seed := range seeds {
		s := newSim(seed, cfg)
		s.run()
		for _, line := range s.log {
			for _, e := range events {
				if strings.Contains(line, e) {
					seen[e]++
				}
			}
		}
		if bad := s.check(); bad != "" {
			t.Fatalf("schedule seed %d: %s\n(rerun: go test -run TestReplicationHasOneHistory ./swarm -args -sim.seed=%d %s)\n%s", seed, bad, seed, cfg, s.transcript())
		}
	}
	t.Logf("%d schedules (%s) in %s (%.0f/s); events seen: %v", len(seeds), cfg, time.Since(start).Round(time.Millisecond), float64(len(seeds))/time.Since(start).Seconds(), seen)
}

// publishStandbys is replicas.publishStandbys: owner pushes its record of
// session id to every live peer and confirms it to its shipper, unless a
// peer it misses is not known down (returned).
func (s *sim) publishStandbys(owner *simNode, id string) (missed string) {
	published := slices.Clone(owner.published.recs[id].Standbys)
	for _, name := range slices.Sorted(maps.Keys(owner.view)) {
		p := s.byName[name]
		switch {
		case owner.view[name].state != cluster.StateAlive:
		case s.reachable(owner, p):
			s.merge(p, owner.name, owner.published)
		case !s.down(owner, name) && missed == "":
			missed = name
		}
	}
	if missed == "" {
		owner.ship.Confirmed(id, published)
		s.settled()
	}
	return missed
}

type sim struct {
	cfg    simConfig
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
	refused [][2]*simNode // calls refused: from, to
	pending sync.WaitGroup

	diskLost   bool // a node lost its disk: at most one per schedule
	faultEnded int  // the tick the last fault ended
	final      bool // the reads after the final heal

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

func newSim(seed int64, cfg simConfig) *sim {
	rng := rand.New(rand.NewSource(seed))
	s := &sim{seed: seed, cfg: cfg, rng: rng, byName: map[string]*simNode{}, group: map[string]int{}, ops: map[string][]*simOp{}}
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

func (s *sim) demoteSuperseded(nd *simNode) {
	for _, id := range slices.Sorted(maps.Keys(nd.sessions)) {
		rec, visible, ok := s.locate(nd, id)
		for _, o := range slices.Sorted(maps.Keys(nd.others)) {
			if r, has := nd.others[o].recs[id]; has && r.Handoff > nd.sessions[id].Epoch {
				rec, visible, ok = r, true, true
			}
		}
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

func (s *sim) run() {
	for s.now = 1; s.now <= simTicks; s.now++ {
		for range 1 + s.rng.Intn(3) {
			s.event()
		}
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
	s.final = true
	for _, id := range s.ids {
		for _, nd := range s.nodes {
			s.call(nd, id, false)
		}
	}
}

// tick delivers what is queued and updates every node's view.
func (s *sim) tick() {
	s.deliver()
	for _, nd := range s.nodes {
		s.observe(nd)
	}
}

func (s *sim) event() {
	nd := s.nodes[s.rng.Intn(len(s.nodes))]
	// With -sim.faults=seq a fault starts only while no node is faulty
	// (crashed, paused or cut off); with one, also only simRecover ticks
	// after the last fault ended, when membership and records converged.
	calm := true
	switch s.cfg.faults {
	case "one":
		calm = !slices.ContainsFunc(s.nodes, s.faulty) && s.now-s.faultEnded >= simRecover
	case "seq":
		calm = !slices.ContainsFunc(s.nodes, s.faulty)
	}
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
			s.faultEnded = s.now
			s.start(nd)
			s.observe(nd) // cluster.Start joins the peers it reaches before the node serves
		}
	case x < 81:
		if !calm {
			break
		}
		for _, p := range s.nodes {
			if s.cfg.faults != "any" {
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
		if slices.ContainsFunc(s.nodes, func(nd *simNode) bool { return s.group[nd.name] != 0 }) {
			s.faultEnded = s.now
		}
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

// crash stops nd's process; with loseDisk its disk goes too.
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
	s.faultEnded = s.now
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
	op := &simOp{Operation: porcupine.Operation{ClientId: len(s.ops[id]), Input: counterIn{write: write, final: s.final, what: fmt.Sprintf("%s via %s", what, nd.name)}, Call: s.clock, Output: unknown, Return: 1 << 62}}
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
	if a != standby.Fenced && a != standby.Demoted && len(out.Unconfirmed) > 0 {
		// The record as it is now reaches every live peer before the
		// answer, or the write is fenced.
		if missed := s.publishStandbys(owner, id); missed != "" {
			a, why = standby.Fenced, fmt.Errorf("the record dropping %v did not reach %s", out.Unconfirmed, missed)
		}
	}
	switch a {
	case standby.Replicated, standby.Alone, standby.Degraded:
		return snap.Val, fmt.Sprintf("%d (%s e%d, acked by %v)", snap.Val, a, snap.Epoch, out.Acked)
	case standby.Demoted:
		s.stop(owner, id)
		return unknown, "not applied"
	}
	return unknown, fmt.Sprintf("%s (%v)", a, why)
}
