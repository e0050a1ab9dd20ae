package swarm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"time"

	"google.golang.org/grpc/status"

	"github.com/mcpswarm/mcpswarm/cluster"
	forwardv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/forward/v1"
	"github.com/mcpswarm/mcpswarm/session"
)

// adoption is a detached session's snapshot on its way to the node that
// takes it over (as JSON, in the previous release's peer-service message).
type adoption struct {
	From     string           `json:"from"`
	Snapshot session.Snapshot `json:"snapshot"`
}

// HandOffResult counts what HandOff did with this node's sessions.
type HandOffResult struct {
	// Moved sessions run on another node now.
	Moved int
	// Kept sessions still run here: no peer could take them.
	Kept int
	// Stopped sessions were lost: detached, refused by the peer, and not
	// restartable here either.
	Stopped int
	// Promoted counts the moved sessions a standby took over from its
	// copy; the other moved sessions were copied to their adopter.
	Promoted int
	// Moves lists the moved sessions in the order they moved.
	Moves []Move
}

// Move is one session HandOff moved.
type Move struct {
	// ID is the session; To the node that runs it now.
	ID, To string
	// Promoted: To was the session's in-sync standby and took it over
	// from its copy under the next epoch; otherwise it was copied.
	Promoted bool
	// Took runs from the detach (calls to the session wait for it and
	// are retried from then) to the new owner's answer, which comes once
	// it has published the session.
	Took time.Duration
}

// HandOff moves every session this node runs to live, non-draining peers,
// each by an ordered transfer of ownership: to the session's in-sync
// standby when it has one that can take it over from its copy (see
// promoteOn), otherwise copied to a peer chosen round-robin:
//
//  1. the session is marked as handing off here, so a call that reaches
//     this node from now on answers the retryable ErrHandingOff (nothing
//     runs) instead of "not running";
//  2. it is detached (its last update applied; its local snapshot is
//     deleted only once the peer has saved it);
//  3. the peer adopts it (from the snapshot sent, or from its standby
//     copy of that same snapshot) with the next handoff generation and
//     publishes its record before answering, so on every node the
//     adopter's record supersedes this one without any tie-break;
//  4. this node replaces its record with a forwarding record naming the
//     adopter (withdrawn after movedTTL), so an entry node that has not yet
//     heard of the adopter still routes calls to it.
//
// A session the peer refuses is started here again from the same snapshot
// (Kept); one that cannot be restarted either is counted as Stopped.
func (s *Swarm) HandOff(ctx context.Context) (HandOffResult, error) {
	var res HandOffResult
	// Peers that adopt with a handoff generation are preferred: with a
	// previous-version adopter the transfer falls back to the old rules.
	var peers, older []string
	for _, m := range s.cl.Members() {
		if !m.Self && m.State == cluster.StateAlive {
			if m.Capabilities.Has(cluster.CapHandoffGen) {
				peers = append(peers, m.Name)
			} else {
				older = append(older, m.Name)
			}
		}
	}
	if len(peers) == 0 {
		peers = older
	}
	sort.Strings(peers)
	local := s.mgr.List()
	if len(peers) == 0 {
		res.Kept = len(local)
		return res, nil
	}
	moved := map[string]uint64{} // id → the generation handed off
	for i, info := range local {
		if err := ctx.Err(); err != nil {
			res.Kept += len(local) - i
			return res, fmt.Errorf("handing off sessions: %w", err)
		}
		outcome, mv := s.handOffOne(ctx, info, peers[i%len(peers)])
		switch outcome {
		case handedOff:
			moved[info.ID] = info.Handoff
			res.Moved++
			res.Moves = append(res.Moves, mv)
			if mv.Promoted {
				res.Promoted++
			}
		case keptHere:
			res.Kept++
		case lost:
			res.Stopped++
		}
	}
	if n := s.awaitAdopters(ctx, moved, adopterWait); n > 0 {
		s.log.Warn("handed-off sessions not yet visible here under their adopters", "sessions", n, "waited", adopterWait)
	}
	return res, nil
}

// adopterWait bounds how long a drain waits for the adopters' records to
// replicate back before it reports.
const adopterWait = 3 * time.Second

// handoffOutcome is what became of one session in HandOff.
type handoffOutcome int

const (
	handedOff handoffOutcome = iota
	keptHere
	lost
)

// handOffOne moves one session: to its standby by promotion when it has
// one that may take it, else (or when the standby refuses) by copying it
// to target.
func (s *Swarm) handOffOne(ctx context.Context, info session.Info, target string) (handoffOutcome, Move) {
	standby := s.handoverStandby(info.ID)
	if standby == "" && s.standbys != nil {
		// Its standby may be one write or one placement behind (a peer
		// just restarted by the same rollout): bring it up to date, so
		// the session moves by promotion rather than by copy.
		s.standbys.CatchUp(ctx, info.ID)
		standby = s.handoverStandby(info.ID)
	}
	to := target
	if standby != "" {
		to = standby
	}
	s.handoffs.set(info.ID, handoffState{to: to})
	began := time.Now()
	snap, err := s.mgr.Detach(ctx, info.ID)
	if err != nil {
		s.handoffs.forget(info.ID)
		// Stopped meanwhile, or it would not stop: nothing moved.
		s.log.Warn("detaching a session for handoff", "session", info.ID, "err", err)
		return keptHere, Move{}
	}
	moving := snap
	moving.Info.Handoff = snap.Info.Handoff + 1
	promoted := false
	if standby != "" {
		switch err := s.promoteOn(ctx, standby, snap); {
		case err == nil:
			promoted, target = true, standby
		case !refusedOutright(err):
			// The standby may have taken the session over and lost its
			// answer: only it may then adopt under the next generation,
			// so the copy goes to it too (and is refused if it runs the
			// session already), never to a second node.
			target = standby
			fallthrough
		default:
			s.log.Info("the standby did not take the session over; copying it instead", "session", info.ID, "standby", standby, "node", target, "err", err)
			s.handoffs.set(info.ID, handoffState{to: target})
		}
	}
	if !promoted {
		err = s.adoptOn(ctx, target, moving)
	}
	took := time.Since(began)
	if err != nil {
		s.log.Warn("a peer refused a handed-off session; keeping it here", "session", info.ID, "node", target, "err", err)
		restarted, err := s.mgr.Adopt(context.WithoutCancel(ctx), snap)
		s.handoffs.forget(info.ID)
		if err != nil {
			s.log.Error("a handed-off session could not be restarted here either: it is lost", "session", info.ID, "err", err)
			s.unpublish(info.ID)
			return lost, Move{}
		}
		s.writeThrough(restarted.ID)
		if err := s.publishRecord(restarted); err != nil {
			s.log.Warn("republishing a session kept here", "session", info.ID, "err", err)
		}
		return keptHere, Move{}
	}
	s.handoffs.set(info.ID, handoffState{to: target, done: true, at: time.Now()})
	// The peer has saved it: only now may our copy go.
	if err := s.mgr.Release(info.ID); err != nil {
		s.log.Warn("a handed-off session's old snapshot stays here; it would be restored next to the peer's after a restart", "session", info.ID, "err", err)
	}
	rec := s.record(snap.Info)
	rec.MovedTo = target
	s.idx.setSession(info.ID, s.cl.Origin(), &rec)
	if b, err := json.Marshal(rec); err != nil {
		s.log.Warn("encoding a forwarding record", "session", info.ID, "err", err)
	} else if err := s.sessions.Put(info.ID, b); err != nil {
		s.log.Warn("publishing a forwarding record", "session", info.ID, "err", err)
	}
	how := "copied"
	if promoted {
		how = "promoted"
	}
	s.met.handedOff(how)
	s.log.Info("session handed off", "session", info.ID, "node", target, "how", how, "generation", moving.Info.Handoff, "took", took)
	return handedOff, Move{ID: info.ID, To: target, Promoted: promoted, Took: took}
}

// adoptOn asks node to adopt snap.
func (s *Swarm) adoptOn(ctx context.Context, node string, snap session.Snapshot) error {
	raw, err := json.Marshal(snap)
	if err != nil {
		return fmt.Errorf("encoding snapshot: %w", err)
	}
	err = s.call(ctx, node, func(fc forwardv1.ForwardServiceClient) error {
		_, err := fc.AdoptSession(ctx, &forwardv1.AdoptSessionRequest{From: s.self, Snapshot: raw})
		return err
	}, func(lc legacyClient) error {
		return lc.adopt(ctx, s.self, snap)
	})
	if st, ok := status.FromError(err); ok && err != nil {
		return fmt.Errorf("node %s refused the session (%s): %s", node, st.Code(), st.Message())
	}
	return err
}

// adopt serves a peer's adoption of snap, handed off by node from: start
// the session here and publish it before answering, so the hand-off
// completes with the session visible under this node. It answers an HTTP
// status and, unless 200, why.
func (s *Swarm) adopt(ctx context.Context, from string, snap session.Snapshot) (int, string) {
	if code, why := s.mayAdopt(from, snap.Info.ID, snap.Info.Handoff); code != http.StatusOK {
		return code, why
	}
	info, err := s.mgr.Adopt(ctx, snap)
	if err != nil {
		return http.StatusConflict, err.Error()
	}
	s.adopted(info)
	return http.StatusOK, ""
}

// mayAdopt says whether this node may adopt session id from node from
// under handoff generation gen: not while draining, nor when another node
// runs the id under that generation or a later one.
func (s *Swarm) mayAdopt(from, id string, gen uint64) (int, string) {
	if s.isDraining() {
		return http.StatusServiceUnavailable, "node " + s.self + " is draining"
	}
	// The sender's own record is superseded by the generation the adoption
	// carries; a record of another node with that generation or a later
	// one means the id is taken.
	if loc, ok := s.locate(id); ok && loc.rec.Node != from && loc.rec.Handoff >= gen {
		return http.StatusConflict, "session " + id + " already runs on node " + route(loc.rec)
	}
	return http.StatusOK, ""
}

// adopted publishes a session this node just adopted.
func (s *Swarm) adopted(info session.Info) {
	// The session may come back to a node that handed it off before.
	s.handoffs.forget(info.ID)
	s.writeThrough(info.ID)
	err := s.publishRecord(info)
	if err == nil {
		err = s.publishTools(info.ID, info.Principal)
	}
	if err != nil {
		s.log.Warn("publishing an adopted session", "session", info.ID, "err", err)
	}
}

// Draining reports whether this node is draining: it takes no new sessions
// and is handing its sessions off, so it should leave load balancing.
func (s *Swarm) Draining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}
