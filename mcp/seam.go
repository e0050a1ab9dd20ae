package mcp

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/mcpswarm/mcpswarm/mcp/seal"
	"github.com/mcpswarm/mcpswarm/mcp/task"
)

// Cluster joins this node's front to the rest of the cluster. New calls
// Attach exactly once, before the front serves anything, with the front
// itself (what other nodes hand to this node arrives through it) and gets
// back the connection registry, the relay the front calls and the task
// table (nil: this node serves no tasks). Both
// directions of the seam are wired in this one step: nothing is set on the
// front or on the cluster afterwards. Attach only keeps the front; the
// cluster may call it once Attach returned (New finishes its own wiring
// right after, before the front serves). A lone node is a one-node
// cluster: every front has one.
type Cluster interface {
	Attach(front Front) (Connections, Relay, task.Store)
}

// Connections is the cluster-wide connection registry: what a connection's
// home node learnt (ConnRegistry), which ids were revoked, which node holds
// each connection's GET stream, the spent single-use request states, and
// whether this node may serve a connection at all. Its methods are called on
// the request path: apart from SpendState (which may wait for the state's
// holders, bounded by ctx) they must not block on the network.
type Connections interface {
	ConnRegistry
	Revocations
	// OfPrincipal returns principal's live connections across the
	// cluster (the connection cap); it may answer nil when principal
	// certainly holds fewer than atLeast.
	OfPrincipal(principal string, atLeast int) []ConnActivity
	// NotifyHere reports whether this node must send connection id's
	// notifications (it holds the connection's stream, or nobody does and
	// this is its home node).
	NotifyHere(connID string) bool
	// StreamChanged records that this node started (held) or stopped
	// holding connection id's GET stream.
	StreamChanged(connID string, held bool)
	// SpendState records a 2026-07-28 requestState nonce of a state for
	// tool cluster-wide and reports whether it had been spent already, so
	// a state is accepted once across nodes, not once per node.
	SpendState(ctx context.Context, tool, nonce string, expires time.Time) (already bool)
	// CanServe reports whether this node may serve a request bound to
	// connection id now. An error (e.g. this node has not caught up with
	// what its peers know about connections) makes the front answer 503
	// with Retry-After, taken from the error when it implements
	// RetryAfter() time.Duration.
	CanServe(connID string) error
}

// Revocations is the part of the cluster's connection registry that a
// session id's validity rests on (the seal package asks it on every
// request).
type Revocations = seal.Revocations

// Relay carries client messages that reached this node to the node that
// needs them. Each method returns once that node answered (bounded by ctx).
type Relay interface {
	// ForwardResponse delivers a client's JSON-RPC response (to sampling,
	// roots or elicitation) to the node waiting for it, whose
	// Front.DeliverResponse takes it. handled false means no node took it.
	ForwardResponse(ctx context.Context, connID string, body []byte) (handled bool, err error)
	// ForwardCancel hands a client's notifications/cancelled to every other
	// node: the call it cancels may be in flight on any of them.
	ForwardCancel(ctx context.Context, connID string, body []byte)
	// ForwardSSE delivers a legacy SSE message POSTed here to node, which
	// holds the stream, and returns the HTTP status that node answered.
	ForwardSSE(ctx context.Context, node, connID string, body []byte) (status int, err error)
}

// Front is what the cluster calls on this node's front: the reverse
// direction of the seam. *Server implements it.
type Front interface {
	// HoldsStream reports whether this node holds connection id's GET
	// stream.
	HoldsStream(connID string) bool
	// DeliverResponse serves a client response or cancellation another
	// node's Relay forwarded here.
	DeliverResponse(ctx context.Context, connID string, body []byte) (status int, err error)
	// DeliverSSE serves a legacy SSE message another node's Relay forwarded
	// here.
	DeliverSSE(ctx context.Context, connID string, body []byte) (status int, err error)
	// Forget drops this node's local state of connection id once another
	// node ended it (the revocation reached this node).
	Forget(connID string)
}

var _ Front = (*Server)(nil)

// canServe asks the registry whether connection id may be served here; when
// it may not, it has answered 503 with Retry-After and a JSON-RPC error
// naming the reason.
func (s *Server) canServe(w http.ResponseWriter, connID string) bool {
	if connID == "" {
		return true
	}
	err := s.registry.CanServe(connID)
	if err == nil {
		return true
	}
	s.metrics.rejected("cannot_serve")
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(err)))
	writeRPCError(w, http.StatusServiceUnavailable, &rpcError{Code: codeInternal,
		Message: "this node cannot serve the connection yet, retry: " + err.Error()})
	return false
}

// retryAfterSeconds is the Retry-After an error asks for, rounded up to
// whole seconds; 1 when it names none.
func retryAfterSeconds(err error) int {
	var ra interface{ RetryAfter() time.Duration }
	if !errors.As(err, &ra) {
		return 1
	}
	d := ra.RetryAfter()
	secs := int((d + time.Second - 1) / time.Second)
	return max(secs, 1)
}
