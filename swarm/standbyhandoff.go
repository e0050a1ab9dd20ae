package swarm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpswarm/mcpswarm/cluster"
	forwardv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/forward/v1"
	"github.com/mcpswarm/mcpswarm/session"
)

// A drain hands a session to its standby by promotion rather than by
// copy: the standby already holds the session's final snapshot (every
// write was shipped to it before it was answered), so the owner sends
// only the session id, the epoch and a digest of that snapshot, and the
// standby starts the session from its copy under the next epoch. The
// digest makes the rule exact: the standby takes the session over only
// from the very state the owner detached, never from a copy one write
// behind or one write ahead (a write refused after it reached a
// standby); on any refusal the owner copies the session as before.

// handoverStandby is the in-sync standby of local session id that may
// take it over from its copy: alive (not draining, not suspect) and of a
// release that can. "" when there is none.
func (s *Swarm) handoverStandby(id string) string {
	if s.standbys == nil {
		return ""
	}
	for _, n := range s.standbys.InSync(id) {
		if m, ok := s.cl.Member(n); ok && m.State == cluster.StateAlive && m.Capabilities.Has(cluster.CapStandbyHandoff) {
			return n
		}
	}
	return ""
}

// errNoPromotion is a peer's answer that it serves no standby handover
// (a release without it, should one be asked anyway).
var errNoPromotion = errors.New("the peer cannot take a session over from its standby copy")

// promoteOn asks node, an in-sync standby of snap's session, to take the
// detached session over from its copy of snap.
func (s *Swarm) promoteOn(ctx context.Context, node string, snap session.Snapshot) error {
	digest, err := snapshotDigest(snap)
	if err != nil {
		return err
	}
	req := &forwardv1.AdoptSessionRequest{From: s.self, Standby: &forwardv1.StandbyHandover{
		Session: snap.Info.ID, Epoch: snap.Info.Handoff, Digest: digest,
	}}
	err = s.call(ctx, node, func(fc forwardv1.ForwardServiceClient) error {
		_, err := fc.AdoptSession(ctx, req)
		return err
	}, func(legacyClient) error { return errNoPromotion })
	if err != nil {
		return fmt.Errorf("standby %s did not take the session over: %w", node, err)
	}
	return nil
}

// refusedOutright reports whether a standby's answer to a handover says
// it started nothing: it refused the request or the copy, or the session
// did not start from it. Any other failure (a deadline, a lost
// connection) leaves open whether it took the session over before its
// answer was lost.
func refusedOutright(err error) bool {
	if errors.Is(err, errNoPromotion) {
		return true
	}
	switch status.Code(err) {
	case codes.FailedPrecondition, codes.PermissionDenied, codes.InvalidArgument, codes.AlreadyExists:
		return true
	}
	return false
}

// snapshotDigest is the SHA-256 of snap's encoding with no tools written
// as null: the owner computes it over the snapshot it detached, the
// standby over its copy decoded, and equal states give equal digests.
func snapshotDigest(snap session.Snapshot) ([]byte, error) {
	if len(snap.Tools) == 0 {
		snap.Tools = nil
	}
	b, err := snap.AppendJSON(nil)
	if err != nil {
		return nil, fmt.Errorf("encoding the snapshot of %s for its digest: %w", snap.Info.ID, err)
	}
	sum := sha256.Sum256(b)
	return sum[:], nil
}

// adoptFromStandby serves an owner's handover of a session this node
// stands by for: caller is the authenticated peer, who must be the owner
// the request names. The session starts from the standby copy under the
// next epoch, only if the copy is the one the owner detached, and is
// published before the answer, as with a copied adoption. It answers an
// HTTP status and, unless 200, why.
func (s *Swarm) adoptFromStandby(ctx context.Context, caller, from string, h *forwardv1.StandbyHandover) (int, string) {
	id := h.GetSession()
	switch {
	case caller == "" || caller != from:
		return http.StatusForbidden, fmt.Sprintf("a session is handed over only by its owner, and the caller is not %q", from)
	case !session.ValidID(id):
		return http.StatusBadRequest, "invalid session id"
	case s.standbys == nil:
		return http.StatusPreconditionFailed, "node " + s.self + " holds no standby copies"
	}
	if code, why := s.mayAdopt(from, id, h.GetEpoch()+1); code != http.StatusOK {
		return code, why
	}
	snap, undo, err := s.standbys.HandOver(id, from, h.GetEpoch(), func(copy session.Snapshot) error {
		d, err := snapshotDigest(copy)
		if err != nil {
			return err
		}
		if !bytes.Equal(d, h.GetDigest()) {
			return errors.New("the copy differs from the owner's final snapshot")
		}
		return nil
	})
	if err != nil {
		return http.StatusPreconditionFailed, err.Error()
	}
	info, err := s.mgr.Adopt(ctx, snap)
	if err != nil {
		undo()
		return http.StatusConflict, err.Error()
	}
	s.standbys.Promoted(id)
	s.adopted(info)
	s.log.Info("took over a handed-off session from its standby copy", "session", id, "old_owner", from, "new_owner", s.self, "epoch", info.Handoff)
	return http.StatusOK, ""
}
