package swarm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/mcp"
	"github.com/mcpswarm/mcpswarm/mcp/task"
	"github.com/mcpswarm/mcpswarm/mcp/wire"
	forwardv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/forward/v1"
)

// frontBox holds the attached front (an interface in an atomic pointer).
type frontBox struct{ mcp.Front }

// Attach implements mcp.Cluster: mcp.New hands this node's front to the
// swarm, which delivers what other nodes forward here to it, and gets the
// connection registry and the relay back. It is the seam's one wiring
// step; until it ran, forwarded client messages are refused as
// Unavailable (the sender retries or answers the client).
func (s *Swarm) Attach(f mcp.Front) (mcp.Connections, mcp.Relay, task.Store) {
	s.frontPtr.Store(&frontBox{f})
	return s.conns, relay{s}, s.tasks
}

// front is the attached front, or nil before Attach.
func (s *Swarm) front() mcp.Front {
	if b := s.frontPtr.Load(); b != nil {
		return b.Front
	}
	return nil
}

var _ mcp.Cluster = (*Swarm)(nil)

// relay implements mcp.Relay over the forward service.
type relay struct{ s *Swarm }

// ForwardResponse hands a client's JSON-RPC response (to sampling, roots
// or elicitation) that reached this node to the node that sent the
// request: the one its relay id names (see wire.ResponseNode); for an
// untagged id, the connection's home node first, then every other live
// member, until one accepts it.
func (r relay) ForwardResponse(ctx context.Context, connID string, body []byte) (bool, error) {
	s := r.s
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	if node, ok := wire.ResponseNode(body); ok {
		// The request's id names the node that sent it: only that node
		// can take the answer.
		code, err := s.deliverResponse(ctx, node, connID, body)
		if err != nil {
			return false, fmt.Errorf("handing the response for connection %s to %s: %w", connID, node, err)
		}
		if code < 200 || code >= 300 {
			return false, fmt.Errorf("handing the response for connection %s to %s: it answered %d", connID, node, code)
		}
		return true, nil
	}
	info, _ := s.conns.Get(connID)
	var order []string
	if info.Node != "" && info.Node != s.self {
		order = append(order, info.Node)
	}
	for _, m := range s.cl.Members() {
		if !m.Self && m.Name != info.Node && m.State == cluster.StateAlive {
			order = append(order, m.Name)
		}
	}
	var lastErr error
	for _, node := range order {
		code, err := s.deliverResponse(ctx, node, connID, body)
		if err != nil {
			lastErr = err
			continue
		}
		if code >= 200 && code < 300 {
			return true, nil
		}
	}
	if lastErr != nil {
		return false, fmt.Errorf("no node took the response for connection %s: %w", connID, lastErr)
	}
	return false, nil
}

// ForwardCancel hands a client's notifications/cancelled to every other
// live node: the call it cancels runs wherever the client's POST landed,
// and each node cancels it only if it is in flight there.
func (r relay) ForwardCancel(ctx context.Context, connID string, body []byte) {
	s := r.s
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for _, m := range s.cl.Members() {
		if m.Self || m.State != cluster.StateAlive {
			continue
		}
		err := s.call(ctx, m.Name, func(fc forwardv1.ForwardServiceClient) error {
			_, err := fc.DeliverCancel(ctx, &forwardv1.DeliverCancelRequest{Connection: connID, Message: body})
			return err
		}, func(lc legacyClient) error {
			_, err := lc.deliver(ctx, connID, kindCancelled, body)
			return err
		})
		if err != nil {
			s.log.Debug("forwarding a cancellation", "node", m.Name, "conn", connID, "err", err)
		}
	}
}

// ForwardSSE hands a legacy SSE message to the node holding its stream
// and returns the HTTP status that node answered.
func (r relay) ForwardSSE(ctx context.Context, node, connID string, body []byte) (int, error) {
	s := r.s
	var code int32
	err := s.call(ctx, node, func(fc forwardv1.ForwardServiceClient) error {
		resp, err := fc.DeliverSseMessage(ctx, &forwardv1.DeliverSseMessageRequest{Connection: connID, Message: body})
		code = resp.GetHttpStatus()
		return err
	}, func(lc legacyClient) error {
		resp, err := lc.deliver(ctx, connID, kindSSEPost, body)
		code = resp.GetHttpStatus()
		return err
	})
	if errors.Is(err, ErrOwnerUnavailable) {
		return 0, err
	}
	if err != nil {
		return 0, s.forwardErr(node, err, true)
	}
	return int(code), nil
}

// deliverResponse hands a client response to node and returns the HTTP
// status its front answered.
func (s *Swarm) deliverResponse(ctx context.Context, node, connID string, body []byte) (int, error) {
	var code int32
	err := s.call(ctx, node, func(fc forwardv1.ForwardServiceClient) error {
		resp, err := fc.DeliverResponse(ctx, &forwardv1.DeliverResponseRequest{Connection: connID, Message: body})
		code = resp.GetHttpStatus()
		return err
	}, func(lc legacyClient) error {
		resp, err := lc.deliver(ctx, connID, kindElicitationResponse, body)
		code = resp.GetHttpStatus()
		return err
	})
	return int(code), err
}
