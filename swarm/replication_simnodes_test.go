package swarm

// The nodes, network, membership and records of the replication
// simulation (replication_sim_test.go).

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sort"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpswarm/mcpswarm/cluster"
	standbyv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/standby/v1"
	"github.com/mcpswarm/mcpswarm/standby"
)

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
	// The members it knew count as dead until heard again (cluster's
	// leases.remember).
	for _, name := range slices.Sorted(maps.Keys(old)) {
		nd.view[name] = &peerView{state: cluster.StateDead, heard: 0, silent: s.now, incarn: old[name].incarn}
		nd.deaths.note(cluster.Member{Name: name, State: cluster.StateDead})
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
		c.s.mu.Lock()
		c.s.refused = append(c.s.refused, [2]*simNode{c.from, c.to})
		c.s.mu.Unlock()
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
	// The peer link saw the refusal too: the member is gone
	// (cluster.Down) if the lease on it ran.
	for _, r := range s.refused {
		if v := r[0].view[r[1].name]; v != nil && !v.gone && v.heard >= 0 {
			v.gone, v.refusedAt = true, s.now
		}
	}
	s.refused = nil
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
			// A relay: only of a member of the view with that incarnation
			// (cluster.accept); a dead one's lands in its hidden partition.
			if v := nd.view[o]; o != nd.name && v != nil && v.incarn == part.incarn {
				s.merge(nd, o, part)
			}
		}
	}
	if changed {
		nd.ship.Rebalance(context.Background())
		s.settled()
		// replicas.retire: the records that drop moved standbys are
		// confirmed, and those standbys released.
		for _, id := range nd.ship.Retiring() {
			s.publishStandbys(nd, id)
		}
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
