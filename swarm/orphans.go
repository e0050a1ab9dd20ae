package swarm

import (
	"context"
	"errors"
	"strings"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/session"
)

// StopOrphans stops the sessions this node runs for an unauthenticated
// connection (principal "conn:<id>") that some node has ended, by a DELETE
// or a revocation. Nobody else can ever own them, so without this they ran
// on as orphans (issue #13). It returns the ids it stopped; the node calls
// it on a ticker, so a session outlives its connection by at most one
// period plus the replication of the revocation.
func (s *Swarm) StopOrphans(ctx context.Context) ([]string, error) {
	var stopped []string
	var errs []error
	for _, info := range s.mgr.List() {
		conn, ok := strings.CutPrefix(info.Principal, authz.ConnSubjectPrefix)
		if !ok || !s.conns.Revoked(conn) {
			continue
		}
		if err := s.mgr.Stop(ctx, info.ID); err != nil && !errors.Is(err, session.ErrNotRunning) {
			errs = append(errs, err)
			continue
		}
		s.log.Info("stopped a session whose unauthenticated connection ended", "session", info.ID, "conn", conn)
		stopped = append(stopped, info.ID)
	}
	return stopped, errors.Join(errs...)
}
