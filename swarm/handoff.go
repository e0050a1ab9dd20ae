package swarm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/session"
)

// KindAdoptSession carries a detached session's snapshot to the node that
// takes it over.
const KindAdoptSession = "adopt_session"

// adoption is the message of KindAdoptSession.
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
}

// HandOff moves every session this node runs to live, non-draining peers,
// round-robin. Each session is detached (its last update applied; its
// local snapshot is deleted only once the peer has saved it) and adopted
// by the peer, which publishes it under
// its own origin with the same id, principal and creation time; for the
// few milliseconds in between, calls to it answer "not running". A session
// the peer refuses is started here again from the same snapshot.
func (s *Swarm) HandOff(ctx context.Context) (HandOffResult, error) {
	var res HandOffResult
	var peers []string
	for _, m := range s.cl.Members() {
		if !m.Self && m.State == cluster.StateAlive {
			peers = append(peers, m.Name)
		}
	}
	sort.Strings(peers)
	local := s.mgr.List()
	if len(peers) == 0 {
		res.Kept = len(local)
		return res, nil
	}
	for i, info := range local {
		if err := ctx.Err(); err != nil {
			res.Kept += len(local) - i
			return res, fmt.Errorf("handing off sessions: %w", err)
		}
		target := peers[i%len(peers)]
		snap, err := s.mgr.Detach(ctx, info.ID)
		if err != nil {
			res.Kept++ // stopped meanwhile, or it would not stop: nothing moved
			s.log.Warn("detaching a session for handoff", "session", info.ID, "err", err)
			continue
		}
		// Withdraw our record now, not a publish round later, so the
		// peer's record is the only one as soon as it replicates.
		s.unpublish(info.ID)
		if err := s.adoptOn(ctx, target, snap); err != nil {
			s.log.Warn("a peer refused a handed-off session; keeping it here", "session", info.ID, "node", target, "err", err)
			if _, err := s.mgr.Adopt(context.WithoutCancel(ctx), snap); err != nil {
				s.log.Error("a handed-off session could not be restarted here either: it is lost", "session", info.ID, "err", err)
				res.Stopped++
				continue
			}
			res.Kept++
			continue
		}
		// The peer has saved it: only now may our copy go.
		if err := s.mgr.Release(info.ID); err != nil {
			s.log.Warn("a handed-off session's old snapshot stays here; it would be restored next to the peer's after a restart", "session", info.ID, "err", err)
		}
		s.log.Info("session handed off", "session", info.ID, "node", target)
		res.Moved++
	}
	return res, nil
}

// adoptOn asks node to adopt snap.
func (s *Swarm) adoptOn(ctx context.Context, node string, snap session.Snapshot) error {
	body, err := json.Marshal(adoption{From: s.self, Snapshot: snap})
	if err != nil {
		return fmt.Errorf("encoding snapshot: %w", err)
	}
	resp, err := s.deliver(ctx, node, "", KindAdoptSession, body)
	if err != nil {
		return err
	}
	if code := resp.GetHttpStatus(); code != http.StatusOK {
		return fmt.Errorf("node %s answered %d: %s", node, code, resp.GetBody())
	}
	return nil
}

// adopt serves a peer's KindAdoptSession: start the session here and
// publish it before answering, so the hand-off completes with the session
// visible under this node.
func (s *Swarm) adopt(ctx context.Context, body []byte) (int, []byte) {
	s.mu.Lock()
	draining := s.draining
	s.mu.Unlock()
	if draining {
		return http.StatusServiceUnavailable, []byte("node " + s.self + " is draining")
	}
	var a adoption
	if err := json.Unmarshal(body, &a); err != nil {
		return http.StatusBadRequest, []byte("adoption is not JSON: " + err.Error())
	}
	snap := a.Snapshot
	// The sender's own record may not have been withdrawn here yet; any
	// other owner means the id is taken.
	if loc, ok := s.locate(snap.Info.ID); ok && loc.rec.Node != a.From {
		return http.StatusConflict, []byte("session " + snap.Info.ID + " already runs on node " + loc.rec.Node)
	}
	info, err := s.mgr.Adopt(ctx, snap)
	if err != nil {
		return http.StatusConflict, []byte(err.Error())
	}
	s.writeThrough(info.ID)
	err = s.publishRecord(info)
	if err == nil {
		err = s.publishTools(info.ID, info.Principal)
	}
	if err != nil {
		s.log.Warn("publishing an adopted session", "session", info.ID, "err", err)
	}
	return http.StatusOK, nil
}
