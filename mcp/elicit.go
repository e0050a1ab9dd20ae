package mcp

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/authz"
)

// outcome is how a parked call was closed.
type outcome int

const (
	outcomePending outcome = iota
	outcomeApproved
	outcomeDeclined
	outcomeCancelled
	outcomeError
	outcomeTimeout
	outcomeShutdown
)

func (o outcome) String() string {
	switch o {
	case outcomePending:
		return "pending"
	case outcomeApproved:
		return "approved"
	case outcomeDeclined:
		return "declined"
	case outcomeCancelled:
		return "cancelled"
	case outcomeError:
		return "elicitation failed"
	case outcomeTimeout:
		return "approval timed out"
	case outcomeShutdown:
		return "server shutting down"
	}
	return "unknown"
}

// parked is one tools/call waiting for the client's approval. It is closed
// exactly once, by whichever of the answer, the timeout, the caller's
// cancellation or shutdown comes first; every path but an approval denies.
type parked struct {
	conn, tool string
	once       sync.Once
	done       chan struct{}
	result     outcome
	cancel     context.CancelFunc
	closes     atomic.Int32 // how many closers tried, for tests
}

func (p *parked) close(o outcome) bool {
	p.closes.Add(1)
	closed := false
	p.once.Do(func() {
		p.result = o
		close(p.done)
		p.cancel()
		closed = true
	})
	return closed
}

// parking tracks the calls parked on this node.
type parking struct {
	mu    sync.Mutex
	next  uint64
	calls map[uint64]*parked
}

func newParking() *parking { return &parking{calls: make(map[uint64]*parked)} }

func (pk *parking) add(p *parked) uint64 {
	pk.mu.Lock()
	defer pk.mu.Unlock()
	pk.next++
	pk.calls[pk.next] = p
	return pk.next
}

func (pk *parking) remove(id uint64) {
	pk.mu.Lock()
	delete(pk.calls, id)
	pk.mu.Unlock()
}

func (pk *parking) closeAll(o outcome) {
	pk.mu.Lock()
	calls := make([]*parked, 0, len(pk.calls))
	for _, p := range pk.calls {
		calls = append(calls, p)
	}
	pk.mu.Unlock()
	for _, p := range calls {
		p.close(o)
	}
}

// elicit parks the call and sends elicitation/create on the call's own
// stream; the answer comes back by its relay id. It returns how the parked
// call was closed.
func (s *Server) elicit(ctx context.Context, c authz.Context, tool, prompt string) outcome {
	client, _ := ClientFrom(ctx)
	ectx, cancel := context.WithTimeout(ctx, s.cfg.ElicitationTimeout)
	p := &parked{conn: c.ConnID, tool: tool, done: make(chan struct{}), cancel: cancel}
	id := s.parked.add(p)
	defer s.parked.remove(id)
	defer p.close(outcomeCancelled)

	go func() {
		res, err := client.Elicit(ectx, approvalParams(tool, prompt))
		switch {
		case err == nil && approved(res):
			p.close(outcomeApproved)
		case err == nil && res != nil && res.Action == mcp.ElicitationResponseActionCancel:
			p.close(outcomeCancelled)
		case err == nil:
			p.close(outcomeDeclined)
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(ectx.Err(), context.DeadlineExceeded):
			p.close(outcomeTimeout)
		case ctx.Err() != nil:
			p.close(outcomeCancelled)
		default:
			s.log.Info("elicitation failed", "tool", tool, "err", err)
			p.close(outcomeError)
		}
	}()
	timer := time.NewTimer(s.cfg.ElicitationTimeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		p.close(outcomeTimeout)
	case <-ctx.Done():
		p.close(outcomeCancelled)
	}
	return p.result
}
