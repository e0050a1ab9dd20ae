package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/mcpswarm/mcpswarm/mcp/wire"
)

// A handler's server-to-client requests (elicitation/create,
// sampling/createMessage, roots/list) go out on the request's own stream
// under a relay id "mcpswarm/<node>/s<n>" (relayid.go); the client's
// answer is a new POST that a load balancer may send to any node, and
// the cluster routes it here by that id.

// errNoAnswer answers a client response to no request waiting here.
var errNoAnswer = errors.New("no pending request for this response")

// clientAnswer is a client's result or error for one request.
type clientAnswer struct {
	result json.RawMessage
	err    json.RawMessage
}

type waitingRequest struct {
	conn   string
	method string
	ch     chan clientAnswer
}

// clientRequests tracks the server-to-client requests this node sent
// itself and awaits.
type clientRequests struct {
	node string

	mu      sync.Mutex
	next    int64
	waiting map[int64]waitingRequest
}

func newClientRequests(node string) *clientRequests {
	return &clientRequests{node: node, waiting: map[int64]waitingRequest{}}
}

// ask writes method(params) to the client of connection conn on out and
// waits for its answer or ctx. A client error comes back as an error that
// names the method.
func (c *clientRequests) ask(ctx context.Context, out interface{ send([]byte) error }, conn, method string, params any) (json.RawMessage, error) {
	c.mu.Lock()
	c.next++
	n := c.next
	w := waitingRequest{conn: conn, method: method, ch: make(chan clientAnswer, 1)}
	c.waiting[n] = w
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiting, n)
		c.mu.Unlock()
	}()
	msg, err := wire.AppendRequest(nil, wire.RelayID(c.node, "s"+strconv.FormatInt(n, 10)), method, params)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", method, err)
	}
	if err := out.send(msg); err != nil {
		return nil, fmt.Errorf("sending %s: %w", method, err)
	}
	select {
	case a := <-w.ch:
		if len(a.err) > 0 && string(a.err) != "null" {
			var e struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}
			_ = json.Unmarshal(a.err, &e)
			return nil, fmt.Errorf("%s error %d: %s", method, e.Code, e.Message)
		}
		return a.result, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the client's answer to %s: %w", method, context.Cause(ctx))
	}
}

// answer hands a client's response to the request local ("s<n>") of
// connection conn; false when none waits here.
func (c *clientRequests) answer(conn, local string, env wire.Envelope) bool {
	n, err := strconv.ParseInt(strings.TrimPrefix(local, "s"), 10, 64)
	if err != nil || !strings.HasPrefix(local, "s") {
		return false
	}
	c.mu.Lock()
	w, ok := c.waiting[n]
	if ok && w.conn == conn {
		delete(c.waiting, n)
	}
	c.mu.Unlock()
	if !ok || w.conn != conn {
		return false
	}
	w.ch <- clientAnswer{result: env.Result, err: env.Error}
	return true
}
