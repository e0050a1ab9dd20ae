package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// mcp-go sends sampling/createMessage and roots/list only on the GET stream
// of the node the request runs on, so behind a load balancer (the GET held
// by another node) they would wait forever; and it parks elicitation/create
// on the request's session object while it delivers answers to whichever
// session object it registered for the id (a GET stream's, on a node that
// holds one), so an answer can miss the waiting call. A request that
// arrived on a POST therefore sends all three itself, on that POST's own
// stream (the
// Streamable HTTP transport's place for server requests that relate to the
// client's request), under a relay id "mcpswarm/<node>/s<n>", and waits
// here for the answer, which the cluster routes to this node.

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

// ask writes method(params) to the client of connection conn on ps and
// waits for its answer or ctx. A client error comes back as an error that
// names the method, as mcp-go words it.
func (c *clientRequests) ask(ctx context.Context, ps *postStream, conn, method string, params any) (json.RawMessage, error) {
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
	msg, err := json.Marshal(map[string]any{
		"jsonrpc": mcp.JSONRPC_VERSION,
		"id":      relayID(c.node, "s"+strconv.FormatInt(n, 10)),
		"method":  method,
		"params":  params,
	})
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", method, err)
	}
	if err := ps.send(msg); err != nil {
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
func (c *clientRequests) answer(conn, local string, env envelope) bool {
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

// deliverLocal takes a client's response addressed (relay id) to this
// node: to a request this package sent, or, with the number restored, to
// mcp-go. It reports whether the response is for this node at all, and,
// for mcp-go, the body to give it.
func (s *Server) deliverLocal(conn string, env envelope, body []byte) (mine bool, status int, forMCPGo []byte) {
	node, local, ok := parseRelayID(env.ID)
	if !ok || node != s.cfg.Node {
		return false, 0, nil
	}
	if n, isNum := mcpgoID(local); isNum {
		out, ok := withNumericID(body, n)
		if !ok {
			return true, http.StatusBadRequest, nil
		}
		return true, 0, out
	}
	if !s.asks.answer(conn, local, env) {
		// A late answer (the call stopped waiting: timeout, cancellation)
		// or a repeated one. Accept and drop it: a 404 would tell the
		// client its whole session is gone.
		s.log.Debug("dropping an answer no request waits for", "conn", conn, "id", string(env.ID))
	}
	return true, http.StatusAccepted, nil
}

// RequestSampling sends sampling/createMessage on the request's own POST
// stream when it has one (see clientreq.go), else through mcp-go.
func (v *viewSession) RequestSampling(ctx context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	if v.post == nil || v.asks == nil {
		if s, ok := v.ClientSession.(interface {
			RequestSampling(context.Context, mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error)
		}); ok {
			return s.RequestSampling(ctx, req)
		}
		return nil, errNotSupported
	}
	raw, err := v.asks.ask(ctx, v.post, v.SessionID(), string(mcp.MethodSamplingCreateMessage), req.CreateMessageParams)
	if err != nil {
		return nil, err
	}
	var res mcp.CreateMessageResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("decoding the sampling answer: %w", err)
	}
	content, err := mcp.ParseSamplingContent(res.Content)
	if err != nil {
		return nil, fmt.Errorf("decoding the sampling answer's content: %w", err)
	}
	res.Content = content
	return &res, nil
}

// ListRoots sends roots/list on the request's own POST stream when it has
// one, else through mcp-go.
func (v *viewSession) ListRoots(ctx context.Context, req mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	if v.post == nil || v.asks == nil {
		if r, ok := v.ClientSession.(interface {
			ListRoots(context.Context, mcp.ListRootsRequest) (*mcp.ListRootsResult, error)
		}); ok {
			return r.ListRoots(ctx, req)
		}
		return nil, errNotSupported
	}
	raw, err := v.asks.ask(ctx, v.post, v.SessionID(), string(mcp.MethodListRoots), req.Params)
	if err != nil {
		return nil, err
	}
	var res mcp.ListRootsResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("decoding the roots answer: %w", err)
	}
	return &res, nil
}

// RequestElicitation sends elicitation/create on the request's own POST
// stream when it has one, else through mcp-go.
func (v *viewSession) RequestElicitation(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	if v.post == nil || v.asks == nil {
		if e, ok := v.ClientSession.(interface {
			RequestElicitation(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error)
		}); ok {
			return e.RequestElicitation(ctx, req)
		}
		return nil, errNotSupported
	}
	raw, err := v.asks.ask(ctx, v.post, v.SessionID(), string(mcp.MethodElicitationCreate), req.Params)
	if err != nil {
		return nil, err
	}
	var res mcp.ElicitationResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("decoding the elicitation answer: %w", err)
	}
	return &res, nil
}
