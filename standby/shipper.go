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
	// Now reads the clock for how long a standby has been behind
	// (default time.Now).
	Now func() time.Time
	// Observe, if set, is told how long each ship waited for its
	// standbys' acknowledgements (the replication lag of a write).
	Observe func(time.Duration)
}

// Shipper is the owner's side: it ships each session's snapshots to the
// session's standbys and tracks which of them hold the newest one. It is
// safe for concurrent use; ships of one session run one at a time.
type Shipper struct {
	cfg ShipperConfig
	log *slog.Logger

	mu       sync.Mutex
	sessions map[string]*shipped
	// links are the HoldStreams to standbys, when cfg.Peers can open them.
	links links
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
	// acked is the seq each placed standby last acknowledged under epoch;
	// behind when each placed standby that is out of sync first missed a
	// snapshot.
	acked  map[string]uint64
	behind map[string]time.Time
	// named are the standbys of every in-sync set since the owner last
	// confirmed its record reached every live peer: a peer may still read
	// any of them in the record.
	named []string
	// retiring are standbys no longer placed that a record may still
	// name: each keeps its copy until the record that drops it is
	// confirmed (Confirmed). Released at once, the owner's death in
	// between would leave the record naming a standby with nothing to
	// promote, and the new standby, with every write, unnamed.
	retiring []string
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
	// Changed is set when the in-sync set is not what it was before.
	Changed bool
	// Unconfirmed are the standbys a record of the session may still
	// name on some peer (published since the owner last confirmed one
	// reached every live peer: Confirmed) that do not hold this snapshot.
	// Any of them could take the session over without it: the owner must
	// confirm the record as it is now before it answers.
	Unconfirmed []string
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
	if cfg.Now == nil {
		cfg.Now = time.Now
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

// Alone reports whether no member but this node may stand by now, so a
// snapshot shipped now would find no standby placed (Outcome.Placed
// empty) whatever its session.
func (s *Shipper) Alone() bool {
	if s.cfg.Replicas <= 0 {
		return true
	}
	self := s.cfg.Peers.Self().Name
	return !slices.ContainsFunc(s.cfg.Peers.Candidates(), func(c Candidate) bool { return c.Name != self })
}

// Ship sends snap, session id's newest snapshot under epoch, to its
// standbys and waits for their acknowledgements (at most AckTimeout).
func (s *Shipper) Ship(ctx context.Context, id string, epoch uint64, snap []byte) Outcome {
	st := s.state(id)
	st.mu.Lock()
	if epoch != st.epoch {
		st.epoch, st.seq = epoch, 0
		clear(st.acked)
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
		switch {
		case slices.Contains(placed, gone):
		case slices.Contains(st.named, gone):
			st.retiring = union(st.retiring, []string{gone})
		default:
			s.releaseOn(gone, id, st.epoch)
		}
	}
	st.retiring = slices.DeleteFunc(st.retiring, func(n string) bool { return slices.Contains(placed, n) })
	if len(placed) > 0 {
		var ahead uint64
		out, ahead = s.fanOut(ctx, id, st, placed)
		if ahead > 0 {
			// A standby holds a later snapshot number of this epoch than
			// this owner sent: an earlier run of this owner shipped it
			// before a restart (numbers start again with the process).
			// What it holds is older than st.last whatever its number:
			// ship again above it, or it takes st.last for a duplicate.
			st.seq = ahead + 1
			out, _ = s.fanOut(ctx, id, st, placed)
		}
	}
	st.track(placed, out.Acked, s.cfg.Now())
	for node, err := range out.Missed {
		if slices.Contains(st.inSync, node) {
			s.log.Warn("standby left the in-sync set", "session", id, "standby", node, "epoch", st.epoch, "err", err)
		}
	}
	out.Changed = !slices.Equal(st.inSync, out.Acked)
	st.placed, st.inSync = placed, out.Acked
	st.named = union(st.named, out.Acked)
	for _, node := range st.named {
		if !slices.Contains(out.Acked, node) {
			out.Unconfirmed = append(out.Unconfirmed, node)
		}
	}
	return out, out.Changed
}

// fanOut ships st.last as snapshot st.seq to the placed standbys, in
// parallel within AckTimeout. ahead is the highest snapshot number of this
// epoch a standby answered it holds beyond st.seq (0 when none does); such
// a standby is counted as missed.
func (s *Shipper) fanOut(ctx context.Context, id string, st *shipped, placed []string) (out Outcome, ahead uint64) {
	out.Placed = placed
	ctx, cancel := context.WithTimeout(ctx, s.cfg.AckTimeout)
	defer cancel()
	type ack struct {
		node string
		held uint64
		err  error
	}
	acks := make(chan ack, len(placed))
	req := &standbyv1.HoldRequest{Session: id, Owner: s.cfg.Peers.Self().Name, Epoch: st.epoch, Seq: st.seq, Snapshot: st.last}
	began := s.cfg.Now()
	if len(placed) == 1 {
		// One standby (the default): call it on this goroutine. A
		// goroutine per write would start on a small stack and grow it
		// into gRPC's deep client path every time (measured: 20 µs of
		// the owner's CPU per write, docs/bench/replication.md).
		held, err := s.hold(ctx, placed[0], req)
		acks <- ack{placed[0], held, err}
	} else {
		for _, node := range placed {
			go func() {
				held, err := s.hold(ctx, node, req)
				acks <- ack{node, held, err}
			}()
		}
	}
	for range placed {
		a := <-acks
		switch {
		case a.err == nil:
			out.Acked = append(out.Acked, a.node)
			continue
		case errors.Is(a.err, errAhead):
			ahead = max(ahead, a.held)
		case errors.Is(a.err, ErrStale):
			out.Stale = a.err
		}
		if out.Missed == nil {
			out.Missed = map[string]error{}
		}
		out.Missed[a.node] = a.err
	}
	slices.Sort(out.Acked)
	if s.cfg.Observe != nil {
		s.cfg.Observe(s.cfg.Now().Sub(began))
	}
	return out, ahead
}

// errAhead is a standby's answer that it holds a later snapshot number of
// the epoch than the one shipped (see shipLocked).
var errAhead = errors.New("holds a later snapshot number of this epoch from an earlier run of the owner")

// track records which placed standbys hold snapshot st.seq now and since
// when the others have been behind; standbys no longer placed are dropped.
func (st *shipped) track(placed, acked []string, now time.Time) {
	if st.acked == nil {
		st.acked, st.behind = map[string]uint64{}, map[string]time.Time{}
	}
	for node := range st.acked {
		if !slices.Contains(placed, node) {
			delete(st.acked, node)
		}
	}
	for node := range st.behind {
		if !slices.Contains(placed, node) {
			delete(st.behind, node)
		}
	}
	for _, node := range placed {
		if slices.Contains(acked, node) {
			st.acked[node] = st.seq
			delete(st.behind, node)
		} else if _, ok := st.behind[node]; !ok {
			st.behind[node] = now
		}
	}
}

// lag returns what each placed standby out of sync lacks.
func (st *shipped) lag(now time.Time) map[string]Lag {
	if len(st.behind) == 0 {
		return nil
	}
	out := make(map[string]Lag, len(st.behind))
	for node, since := range st.behind {
		out[node] = Lag{Updates: st.seq - st.acked[node], For: now.Sub(since)}
	}
	return out
}

// hold ships req to node and maps a refusal of an older epoch to ErrStale,
// and an answer that the standby holds a later snapshot number of the
// epoch to errAhead (with that number).
func (s *Shipper) hold(ctx context.Context, node string, req *standbyv1.HoldRequest) (held uint64, err error) {
	var resp *standbyv1.HoldResponse
	streamed := false
	if sp, ok := s.cfg.Peers.(StreamPeers); ok {
		resp, streamed, err = s.holdOverStream(ctx, sp, node, req)
	}
	if !streamed {
		var c standbyv1.StandbyServiceClient
		if c, err = s.cfg.Peers.Client(node); err != nil {
			return 0, fmt.Errorf("reaching standby %s: %w", node, err)
		}
		resp, err = c.Hold(ctx, req)
	}
	if err != nil {
		if status.Code(err) == codes.FailedPrecondition {
			return 0, fmt.Errorf("standby %s: %w: %s", node, ErrStale, status.Convert(err).Message())
		}
		return 0, fmt.Errorf("standby %s: %w", node, err)
	}
	if resp.GetEpoch() == req.GetEpoch() && resp.GetSeq() > req.GetSeq() {
		return resp.GetSeq(), fmt.Errorf("standby %s: %w (%d > %d)", node, errAhead, resp.GetSeq(), req.GetSeq())
	}
	return resp.GetSeq(), nil
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

// Close ends the Shipper's streams to its standbys; a ship after Close
// fails.
func (s *Shipper) Close() { s.links.close() }

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
	for _, node := range union(slices.Clone(st.placed), st.retiring) {
		s.releaseOn(node, id, st.epoch)
	}
	st.placed, st.inSync, st.last = nil, nil, nil
	st.acked, st.behind, st.named, st.retiring = nil, nil, nil, nil
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
	s.links.prune(candidates)
	n := 0
	for _, id := range ids {
		if s.resync(ctx, id, self, candidates) {
			n++
		}
	}
	return n
}

// Resync ships session id's last snapshot again if its placement changed
// or a placed standby is out of sync, as Rebalance does for every session:
// a drain calls it so the session's standby holds its final state and can
// take it over by promotion. It reports whether it shipped.
func (s *Shipper) Resync(ctx context.Context, id string) bool {
	s.mu.Lock()
	_, known := s.sessions[id]
	s.mu.Unlock()
	if !known {
		return false
	}
	return s.resync(ctx, id, s.cfg.Peers.Self(), s.cfg.Peers.Candidates())
}

func (s *Shipper) resync(ctx context.Context, id string, self Candidate, candidates []Candidate) bool {
	st := s.state(id)
	st.mu.Lock()
	placed := Place(id, self, candidates, s.cfg.Replicas)
	if st.last == nil || (slices.Equal(placed, st.placed) && slices.Equal(placed, st.inSync)) {
		st.mu.Unlock()
		return false
	}
	st.seq++
	_, changed := s.shipLocked(ctx, id, st)
	st.mu.Unlock()
	if changed && s.cfg.OnChange != nil {
		s.cfg.OnChange(id)
	}
	return true
}

// Confirmed tells the shipper that session id's record, published with
// in-sync set published, has reached every live peer: the standbys no
// longer in sync stop being Unconfirmed.
func (s *Shipper) Confirmed(id string, published []string) {
	s.mu.Lock()
	st := s.sessions[id]
	s.mu.Unlock()
	if st == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	// A set that changed since was published too, without confirmation.
	st.named = union(slices.Clone(published), st.inSync)
	st.retiring = slices.DeleteFunc(st.retiring, func(n string) bool {
		if slices.Contains(st.named, n) {
			return false
		}
		s.releaseOn(n, id, st.epoch)
		return true
	})
}

// Retiring returns the sessions with a standby that is no longer placed
// and waits for its release until a record that drops it is confirmed:
// the owner should publish their records and confirm them (Confirmed).
func (s *Shipper) Retiring() []string {
	s.mu.Lock()
	all := make([]*shipped, 0, len(s.sessions))
	ids := make([]string, 0, len(s.sessions))
	for id, st := range s.sessions {
		ids = append(ids, id)
		all = append(all, st)
	}
	s.mu.Unlock()
	var out []string
	for i, st := range all {
		st.mu.Lock()
		if len(st.retiring) > 0 {
			out = append(out, ids[i])
		}
		st.mu.Unlock()
	}
	slices.Sort(out)
	return out
}

// union returns a with the elements of b it lacks, sorted.
func union(a, b []string) []string {
	for _, x := range b {
		if !slices.Contains(a, x) {
			a = append(a, x)
		}
	}
	slices.Sort(a)
	return a
}

// Status is what the owner knows of one session's standbys.
type Status struct {
	Epoch, Seq uint64
	// Placed are the session's standbys; InSync those holding snapshot
	// Seq.
	Placed, InSync []string
	// Behind says, for each placed standby out of sync, what it lacks.
	Behind map[string]Lag
}

// Lag is how far a standby is behind its session's owner.
type Lag struct {
	// Updates is how many snapshots the owner saved since the last one
	// the standby acknowledged under the current epoch (all of them when
	// it never acknowledged one).
	Updates uint64
	// For is how long it has been out of sync.
	For time.Duration
}

// Summary is what the owner knows of all its sessions' standbys, for
// metrics.
type Summary struct {
	// ByInSync counts the sessions by the size of their in-sync set.
	ByInSync map[int]int
	// MaxLag is the most updates any placed standby lacks.
	MaxLag uint64
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
	return Status{Epoch: st.epoch, Seq: st.seq, Placed: slices.Clone(st.placed), InSync: slices.Clone(st.inSync), Behind: st.lag(s.cfg.Now())}, true
}

// Summary sums up the standbys of every session this shipper ships.
func (s *Shipper) Summary() Summary {
	s.mu.Lock()
	all := make([]*shipped, 0, len(s.sessions))
	for _, st := range s.sessions {
		all = append(all, st)
	}
	s.mu.Unlock()
	sum := Summary{ByInSync: map[int]int{}}
	for _, st := range all {
		// TryLock: a ship in progress holds the lock for up to
		// AckTimeout, and a scrape must not wait for it; such a session
		// is counted at the next scrape.
		if !st.mu.TryLock() {
			continue
		}
		if st.last != nil {
			sum.ByInSync[len(st.inSync)]++
			for node := range st.behind {
				if d := st.seq - st.acked[node]; d > sum.MaxLag {
					sum.MaxLag = d
				}
			}
		}
		st.mu.Unlock()
	}
	return sum
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
