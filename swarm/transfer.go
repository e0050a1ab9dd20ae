package swarm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/session"
)

// ErrHandingOff marks a call that met a session in the middle of a handoff
// from a draining node to its adopter. Nothing ran: the client may retry
// the same call, and after a few milliseconds it reaches the adopter. The
// entry node retries by itself for up to handoffRetryWindow first, so a
// client sees this only when a handoff stalls.
var ErrHandingOff = errors.New("the session is being handed off to another node; retry")

// handoffRetryWindow bounds how long an entry node retries a call that met
// a handoff before it answers ErrHandingOff: one handoff takes a detach,
// one peer round trip and a registry write (milliseconds), a whole drain
// well under a second.
const handoffRetryWindow = 3 * time.Second

// movedTTL is how long a sender keeps the forwarding record of a session
// it handed off: long enough for the adopter's record to reach every node,
// short enough that the id is free again soon after the adopter stops it.
const movedTTL = 30 * time.Second

// handoffReason names the handoff answer in a gRPC status's ErrorInfo, so
// an entry node can tell "retry, nothing ran" from any other refusal.
const handoffReason = "SESSION_HANDOFF"

// handoffError is an ErrHandingOff naming where the session is going.
type handoffError struct {
	id, to string
	// done: the adopter runs the session already; a retry may go to it
	// straight away, before its record arrives here.
	done bool
}

func (e *handoffError) Error() string {
	if e.done {
		return fmt.Sprintf("session %s has moved to node %s; retry", e.id, e.to)
	}
	return fmt.Sprintf("session %s is being handed off to node %s; retry", e.id, e.to)
}

// Is makes a handoffError match ErrHandingOff.
func (e *handoffError) Is(target error) bool { return target == ErrHandingOff }

// status encodes e for a peer: Unavailable (retryable) with an ErrorInfo
// that carries the adopter's name.
func (e *handoffError) status() error {
	st := status.New(codes.Unavailable, e.Error())
	done := "false"
	if e.done {
		done = "true"
	}
	withInfo, err := st.WithDetails(&errdetails.ErrorInfo{
		Reason: handoffReason, Domain: "mcpswarm",
		Metadata: map[string]string{"session": e.id, "node": e.to, "done": done},
	})
	if err != nil {
		return st.Err()
	}
	return withInfo.Err()
}

// handoffFromStatus decodes a peer's handoff answer; nil for any other error.
func handoffFromStatus(err error) *handoffError {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return nil
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == handoffReason {
			md := info.GetMetadata()
			return &handoffError{id: md["session"], to: md["node"], done: md["done"] == "true"}
		}
	}
	return nil
}

// handoffState is what a sender remembers of a session it hands off.
type handoffState struct {
	to   string
	done bool
	at   time.Time
}

// handoffs is the sender's table of sessions in or after a handoff; its
// zero value is ready to use.
type handoffs struct {
	mu sync.Mutex
	m  map[string]handoffState
}

func (h *handoffs) set(id string, st handoffState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string]handoffState{}
	}
	h.m[id] = st
}

func (h *handoffs) get(id string) (handoffState, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st, ok := h.m[id]
	return st, ok
}

func (h *handoffs) forget(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, id)
}

// expired removes and returns the completed handoffs older than ttl.
func (h *handoffs) expired(now time.Time, ttl time.Duration) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for id, st := range h.m {
		if st.done && now.Sub(st.at) >= ttl {
			out = append(out, id)
			delete(h.m, id)
		}
	}
	return out
}

// supersedes reports whether record a (of origin ao) is the session rather
// than record b (of origin bo). A later handoff generation always wins: an
// adoption is an ordered transfer, never settled by a tie-break. Only two
// records of the same generation (a concurrent creation of one id) fall
// back to the creation rule.
func supersedes(a sessionRecord, ao string, b sessionRecord, bo string) bool {
	if a.Handoff != b.Handoff {
		return a.Handoff > b.Handoff
	}
	return earlier(a.Created, ao, b.Created, bo)
}

// route is the node that serves calls to the session of rec: its owner, or
// for a sender's forwarding record, the adopter.
func route(rec sessionRecord) string {
	if rec.MovedTo != "" {
		return rec.MovedTo
	}
	return rec.Node
}

// handingOff turns a local "not running" into the handoff answer when the
// session is being (or has just been) handed off from this node.
func (s *Swarm) handingOff(id string, err error) error {
	if err == nil || !errors.Is(err, session.ErrNotRunning) {
		return err
	}
	if st, ok := s.handoffs.get(id); ok {
		return &handoffError{id: id, to: st.to, done: st.done}
	}
	return err
}

// ownerStatus maps an owner-side error to the status a peer receives,
// answering a handoff as a retryable Unavailable with the adopter's name.
func (s *Swarm) ownerStatus(id string, err error) error {
	var he *handoffError
	if errors.As(s.handingOff(id, err), &he) {
		return he.status()
	}
	return ownerErr(err)
}

// sweepHandoffs withdraws the forwarding records of handoffs older than
// movedTTL.
func (s *Swarm) sweepHandoffs(now time.Time) {
	for _, id := range s.handoffs.expired(now, movedTTL) {
		if _, running := s.mgr.Get(id); !running {
			s.unpublish(id)
		}
	}
}

// viaOwner runs op against the node that serves session id for c, and
// while op meets a handoff, retries it (against the adopter as soon as one
// is named) with a short backoff, within handoffRetryWindow and ctx. A
// handoff answer means nothing ran, so retrying a write is safe.
func viaOwner[T any](ctx context.Context, s *Swarm, c authz.Context, id string, op func(node string) (T, error)) (T, error) {
	stopAt := time.Now().Add(handoffRetryWindow)
	wait := 2 * time.Millisecond
	var next string // the adopter a handoff answer named
	for {
		loc, err := s.resolve(c, id)
		if err != nil {
			var zero T
			if !s.adopterPending(id) {
				return zero, err
			}
			// The sender left; its adopter's record is on its way.
			if time.Now().Add(wait).After(stopAt) || sleepCtx(ctx, wait) != nil {
				if errors.Is(err, ErrOwnerUnavailable) {
					return zero, err // its text says to retry
				}
				return zero, fmt.Errorf("%w; retry later", err)
			}
			wait = min(2*wait, 50*time.Millisecond)
			continue
		}
		node := route(loc.rec)
		if next != "" {
			node = next
		}
		v, err := op(node)
		var he *handoffError
		switch {
		case errors.As(err, &he):
		case unreachableOwner(err):
			// The owner left (a drained node exiting) before the adopter's
			// record reached this node: the record will move on shortly.
			if time.Now().Add(wait).After(stopAt) {
				return v, fmt.Errorf("%w; retry", err)
			}
			he = &handoffError{}
		default:
			if node == s.self && errors.Is(err, session.ErrNotRunning) && s.takenOver(c, id) {
				// Demoted here a moment ago (its record still names this
				// node): the new owner serves it once its record arrives.
				return v, errTakenOver(id)
			}
			return v, err
		}
		next = ""
		if he.done && he.to != "" && he.to != node {
			next = he.to // the adopter runs it: retry there at once
		}
		if time.Now().Add(wait).After(stopAt) {
			return v, err
		}
		if next != "" {
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// unreachableOwner reports whether err says the owner could not be
// reached before the call was sent: nothing ran, so a retry is safe.
func unreachableOwner(err error) bool {
	return errors.Is(err, ErrOwnerUnavailable) && !errors.Is(err, ErrMayHaveApplied)
}

// adopterPending reports whether id's last known owner is hidden after a
// handoff (its record forwarded to an adopter, or the node drained and
// left), so the adopter's record is still to reach this node.
func (s *Swarm) adopterPending(id string) bool {
	s.mu.Lock()
	rec, hidden := s.unavailable[id]
	s.mu.Unlock()
	if !hidden {
		return false
	}
	return s.senderLeft(rec)
}

// senderLeft reports whether rec is the record of a sender that handed
// its session off: a forwarding record, or one of a node that drained and
// left.
func (s *Swarm) senderLeft(rec sessionRecord) bool {
	if rec.MovedTo != "" {
		return true
	}
	m, ok := s.cl.Member(rec.Node)
	return ok && (m.State == cluster.StateLeft || m.State == cluster.StateDraining)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// awaitAdopters waits, within d and ctx, until this node's replica shows
// each handed-off session (record and tools) under a later generation
// than gens holds: the
// adopters' records have replicated (pushed to every peer at once), so the
// sender may leave without entry nodes losing sight of the sessions.
func (s *Swarm) awaitAdopters(ctx context.Context, gens map[string]uint64, d time.Duration) int {
	stopAt := time.Now().Add(d)
	for {
		pending := 0
		for id, gen := range gens {
			if loc, ok := s.idx.locate(id); !ok || loc.rec.Handoff <= gen || loc.rec.Node == s.self || !s.idx.hasTools(id, loc.origin) {
				pending++
			}
		}
		if pending == 0 || time.Now().After(stopAt) || sleepCtx(ctx, 5*time.Millisecond) != nil {
			return pending
		}
	}
}
