package standby

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	standbyv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/standby/v1"
)

// Peers is what a Shipper needs of the cluster.
type Peers interface {
	// Self is this node.
	Self() Candidate
	// Candidates lists the live members that may stand by (this node
	// may be among them; it is skipped).
	Candidates() []Candidate
	// Client returns a standby client for the named member.
	Client(node string) (standbyv1.StandbyServiceClient, error)
}

// DefaultAckTimeout bounds how long a snapshot waits for a standby's
// acknowledgement before that standby leaves the session's in-sync set.
const DefaultAckTimeout = time.Second

// ShipperConfig configures a Shipper.
type ShipperConfig struct {
	// Replicas is how many standbys each session has (R).
	Replicas int
	// Peers reaches the cluster.
	Peers Peers
	// AckTimeout bounds a standby's acknowledgement (default
	// DefaultAckTimeout).
	AckTimeout time.Duration
	// OnChange, if set, is called (without locks held) when a session's
	// set of in-sync standbys changed, so the owner can republish it.
	OnChange func(session string)
	// Logger receives standbys leaving and rejoining the in-sync set.
	Logger *slog.Logger
}

// Shipper is the owner's side: it ships each session's snapshots to the
// session's standbys and tracks which of them hold the newest one. It is
// safe for concurrent use; ships of one session run one at a time.
type Shipper struct {
	cfg ShipperConfig
	log *slog.Logger

	mu       sync.Mutex
	sessions map[string]*shipped
}

// shipped is the owner's record of one session's standbys.
type shipped struct {
	mu sync.Mutex // held for a whole ship: one at a time per session
	// epoch and seq of the last snapshot shipped; last is its bytes, kept
	// so a new standby can be brought up to date without a new update.
	epoch, seq uint64
	last       []byte
	// placed are the standbys chosen for the last ship; inSync those that
	// acknowledged it.
	placed []string
	inSync []string
}

// Outcome says what became of one snapshot.
type Outcome struct {
	// Placed are the session's standbys; Acked those that hold the
	// snapshot now.
	Placed, Acked []string
	// Missed are the placed standbys that did not acknowledge in time,
	// with why.
	Missed map[string]error
	// Stale is set when a standby refused the snapshot because it holds
	// a later epoch: another node owns the session now.
	Stale error
}

// Replicated reports whether every placed standby holds the snapshot and
// there is at least one.
func (o Outcome) Replicated() bool { return len(o.Placed) > 0 && len(o.Missed) == 0 && o.Stale == nil }

// NewShipper returns a Shipper; a Replicas of 0 ships nothing.
func NewShipper(cfg ShipperConfig) *Shipper {
	if cfg.AckTimeout <= 0 {
		cfg.AckTimeout = DefaultAckTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Shipper{cfg: cfg, log: cfg.Logger, sessions: map[string]*shipped{}}
}

func (s *Shipper) state(id string) *shipped {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.sessions[id]
	if st == nil {
		st = &shipped{}
		s.sessions[id] = st
	}
	return st
}

// Ship sends snap, session id's newest snapshot under epoch, to its
// standbys and waits for their acknowledgements (at most AckTimeout).
func (s *Shipper) Ship(ctx context.Context, id string, epoch uint64, snap []byte) Outcome {
	st := s.state(id)
	st.mu.Lock()
	if epoch != st.epoch {
		st.epoch, st.seq = epoch, 0
	}
	st.seq++
	st.last = append(st.last[:0], snap...)
	out, changed := s.shipLocked(ctx, id, st)
	st.mu.Unlock()
	if changed && s.cfg.OnChange != nil {
		s.cfg.OnChange(id)
	}
	return out
}

// shipLocked ships st.last to the session's current placement, releases
// standbys no longer placed, and updates the in-sync set. It reports
// whether that set changed.
func (s *Shipper) shipLocked(ctx context.Context, id string, st *shipped) (Outcome, bool) {
	placed := Place(id, s.cfg.Peers.Self(), s.cfg.Peers.Candidates(), s.cfg.Replicas)
	out := Outcome{Placed: placed}
	for _, gone := range st.placed {
		if !slices.Contains(placed, gone) {
			s.releaseOn(gone, id, st.epoch)
		}
	}
	if len(placed) > 0 {
		ctx, cancel := context.WithTimeout(ctx, s.cfg.AckTimeout)
		type ack struct {
			node string
			err  error
		}
		acks := make(chan ack, len(placed))
		req := &standbyv1.HoldRequest{Session: id, Owner: s.cfg.Peers.Self().Name, Epoch: st.epoch, Seq: st.seq, Snapshot: st.last}
		for _, node := range placed {
			go func() {
				acks <- ack{node, s.hold(ctx, node, req)}
			}()
		}
		for range placed {
			a := <-acks
			switch {
			case a.err == nil:
				out.Acked = append(out.Acked, a.node)
			case errors.Is(a.err, ErrStale):
				out.Stale = a.err
				fallthrough
			default:
				if out.Missed == nil {
					out.Missed = map[string]error{}
				}
				out.Missed[a.node] = a.err
			}
		}
		cancel()
		slices.Sort(out.Acked)
	}
	for node, err := range out.Missed {
		if slices.Contains(st.inSync, node) {
			s.log.Warn("standby left the in-sync set", "session", id, "standby", node, "epoch", st.epoch, "err", err)
		}
	}
	changed := !slices.Equal(st.inSync, out.Acked)
	st.placed, st.inSync = placed, out.Acked
	return out, changed
}

// hold ships req to node and maps a refusal of an older epoch to ErrStale.
func (s *Shipper) hold(ctx context.Context, node string, req *standbyv1.HoldRequest) error {
	c, err := s.cfg.Peers.Client(node)
	if err != nil {
		return fmt.Errorf("reaching standby %s: %w", node, err)
	}
	if _, err := c.Hold(ctx, req); err != nil {
		if status.Code(err) == codes.FailedPrecondition {
			return fmt.Errorf("standby %s: %w: %s", node, ErrStale, status.Convert(err).Message())
		}
		return fmt.Errorf("standby %s: %w", node, err)
	}
	return nil
}

// releaseOn tells node, in the background and within AckTimeout, that it
// no longer stands by for the session. A lost release leaves a copy that
// a later epoch's snapshot or the session's stop replaces.
func (s *Shipper) releaseOn(node, id string, epoch uint64) {
	c, err := s.cfg.Peers.Client(node)
	if err != nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.AckTimeout)
		defer cancel()
		if _, err := c.Release(ctx, &standbyv1.ReleaseRequest{Session: id, Epoch: epoch}); err != nil {
			s.log.Debug("releasing a standby copy", "session", id, "standby", node, "err", err)
		}
	}()
}

// Forget drops the session (stopped, or handed to another node) and
// releases its standbys.
func (s *Shipper) Forget(id string) {
	s.mu.Lock()
	st := s.sessions[id]
	delete(s.sessions, id)
	s.mu.Unlock()
	if st == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, node := range st.placed {
		s.releaseOn(node, id, st.epoch)
	}
	st.placed, st.inSync, st.last = nil, nil, nil
}

// Rebalance ships each session's last snapshot again where its placement
// changed or a placed standby is out of sync (after a member joined, left
// or died), so R copies are restored without waiting for an update. It
// returns how many sessions it shipped.
func (s *Shipper) Rebalance(ctx context.Context) int {
	s.mu.Lock()
	ids := make([]string, 0, len(s.sessions))
	for id := range s.sessions {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	self, candidates := s.cfg.Peers.Self(), s.cfg.Peers.Candidates()
	n := 0
	for _, id := range ids {
		st := s.state(id)
		st.mu.Lock()
		placed := Place(id, self, candidates, s.cfg.Replicas)
		if st.last == nil || (slices.Equal(placed, st.placed) && slices.Equal(placed, st.inSync)) {
			st.mu.Unlock()
			continue
		}
		st.seq++
		_, changed := s.shipLocked(ctx, id, st)
		st.mu.Unlock()
		n++
		if changed && s.cfg.OnChange != nil {
			s.cfg.OnChange(id)
		}
	}
	return n
}

// Status is what the owner knows of one session's standbys.
type Status struct {
	Epoch, Seq uint64
	// Placed are the session's standbys; InSync those holding snapshot
	// Seq.
	Placed, InSync []string
}

// Status returns session id's standbys; ok is false for a session never
// shipped.
func (s *Shipper) Status(id string) (Status, bool) {
	s.mu.Lock()
	st := s.sessions[id]
	s.mu.Unlock()
	if st == nil {
		return Status{}, false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return Status{Epoch: st.epoch, Seq: st.seq, Placed: slices.Clone(st.placed), InSync: slices.Clone(st.inSync)}, true
}

// Prime records a session's snapshot without shipping it (a session
// restored from the owner's journal at start); the next Rebalance ships it
// to its standbys.
func (s *Shipper) Prime(id string, epoch uint64, snap []byte) {
	st := s.state(id)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.last == nil {
		st.epoch, st.last = epoch, append([]byte(nil), snap...)
	}
}
