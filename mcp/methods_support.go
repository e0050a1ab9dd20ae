package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/mcp/apps"
	"github.com/mcpswarm/mcpswarm/mcp/wire"
)

// maxInputRounds bounds how often one call may ask a session-based client
// for input.
const maxInputRounds = 10

// findResource resolves a resources/read: the session app's page (for a
// client offered it), a resource of that exact URI, or the first template
// matching it, whose variables become req's arguments.
func (s *Server) findResource(ctx context.Context, x *exchange, req *mcp.ReadResourceRequest) (ResourceHandler, bool) {
	uri := req.Params.URI
	if uri == apps.URI && offersUI(ctx, x.env.Params) {
		return appServerResource().Handler, true
	}
	if r, ok := s.ext.resource(uri); ok {
		return r.Handler, true
	}
	t, ok := s.ext.template(uri)
	if !ok {
		return nil, false
	}
	vars := t.Template.URITemplate.Match(uri)
	req.Params.Arguments = make(map[string]any, len(vars))
	for name, v := range vars {
		req.Params.Arguments[name] = v.V
	}
	return t.Handler, true
}

func (s *Server) findPrompt(name string) (PromptHandler, bool) {
	p, ok := s.ext.prompt(name)
	return p.Handler, ok
}

// subscribe records connection conn's (un)subscription to uri here and in
// the cluster's registry.
func (s *Server) subscribe(conn string, p authz.Principal, uri string, on bool) {
	if conn == "" {
		return
	}
	s.conns.subscribe(conn, p, uri, on)
	s.recordSubscription(conn, uri, on)
}

// resolveInput answers a session-based client's input requests a result
// carries (SEP-2322's input_required, which only 2026-07-28 clients read)
// with the server-to-client requests that client understands, and runs the
// handler again with the answers, until it finishes.
func resolveInput[T any](ctx context.Context, s *Server, x *exchange, res *T, needs func(*T) (mcp.InputRequests, string, bool),
	retry func(context.Context, mcp.MultiRoundTripParams) (*T, error),
) (*T, error) {
	for round := 0; res != nil; round++ {
		reqs, state, pending := needs(res)
		if !pending {
			break
		}
		answers, err := s.fulfil(ctx, x, reqs, round)
		if err != nil {
			return nil, err
		}
		if res, err = retry(ctx, mcp.MultiRoundTripParams{InputResponses: answers, RequestState: state}); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func toolNeedsInput(r *mcp.CallToolResult) (mcp.InputRequests, string, bool) {
	return r.InputRequests, r.RequestState, r.NeedsInput()
}

func promptNeedsInput(r *mcp.GetPromptResult) (mcp.InputRequests, string, bool) {
	return r.InputRequests, r.RequestState, r.NeedsInput()
}

// fulfil sends each input request to the client, concurrently, and
// collects the answers; the first failure cancels the rest.
func (s *Server) fulfil(ctx context.Context, x *exchange, reqs mcp.InputRequests, round int) (mcp.InputResponses, error) {
	if len(reqs) == 0 {
		return nil, errors.New("multi round-trip: the server is shedding load; retry later")
	}
	if round >= maxInputRounds {
		return nil, fmt.Errorf("multi round-trip: handler asked for input more than %d times", maxInputRounds)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		out   = make(mcp.InputResponses, len(reqs))
		first error
	)
	c := Client{x}
	for id, r := range reqs {
		wg.Go(func() {
			resp, err := c.fulfilOne(ctx, r)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = fmt.Errorf("fulfilling input request %q: %w", id, err)
					cancel()
				}
				return
			}
			out[id] = resp
		})
	}
	wg.Wait()
	if first != nil {
		return nil, fmt.Errorf("multi round-trip: %w", first)
	}
	return out, nil
}

func (c Client) fulfilOne(ctx context.Context, r mcp.InputRequest) (mcp.InputResponse, error) {
	switch r.Method {
	case mcp.MethodElicitationCreate:
		if r.Elicitation == nil {
			return mcp.InputResponse{}, errors.New("elicitation input request has no params")
		}
		res, err := c.Elicit(ctx, *r.Elicitation)
		if err != nil {
			return mcp.InputResponse{}, err
		}
		return mcp.NewElicitationInputResponse(*res), nil
	case mcp.MethodSamplingCreateMessage:
		if r.Sampling == nil {
			return mcp.InputResponse{}, errors.New("sampling input request has no params")
		}
		res, err := c.Sample(ctx, *r.Sampling)
		if err != nil {
			return mcp.InputResponse{}, err
		}
		return mcp.NewSamplingInputResponse(*res), nil
	case mcp.MethodListRoots:
		res, err := c.Roots(ctx)
		if err != nil {
			return mcp.InputResponse{}, err
		}
		return mcp.NewRootsInputResponse(*res), nil
	}
	return mcp.InputResponse{}, fmt.Errorf("unsupported input request method %q", r.Method)
}

// decorate stamps what 2026-07-28 requires on every result: its
// resultType, the server's identity in _meta and, on lists and reads,
// caching hints.
func (s *Server) decorate(res any, method string) any {
	md, ok := res.(mcp.ResultMetadata)
	if !ok {
		return res
	}
	if md.GetResultType() == "" {
		md.SetResultType(mcp.ResultTypeComplete)
	}
	if meta := md.EnsureResultMeta(); meta != nil && meta.ServerInfo() == nil {
		meta.SetServerInfo(s.implementation())
	}
	if cacheable(method) {
		if h, ok := res.(mcp.CacheHintSetter); ok {
			if t, ok := res.(interface{ TTL() (int64, bool) }); !ok || !hasTTL(t) {
				h.SetCacheHints(0, mcp.CacheScopePrivate)
			}
		}
	}
	return res
}

func hasTTL(t interface{ TTL() (int64, bool) }) bool {
	_, ok := t.TTL()
	return ok
}

func cacheable(method string) bool {
	switch mcp.MCPMethod(method) {
	case mcp.MethodToolsList, mcp.MethodPromptsList, mcp.MethodResourcesList,
		mcp.MethodResourcesTemplatesList, mcp.MethodResourcesRead, mcp.MethodServerDiscover:
		return true
	}
	return false
}

// appendResult appends the JSON-RPC response carrying res to dst.
func appendResult(dst []byte, id json.RawMessage, res any) ([]byte, error) {
	var rid any
	if len(id) > 0 {
		rid = id
	}
	return wire.AppendResult(dst, rid, res)
}

// completePrompt completes an argument of a prompt: the front's own prompts
// from its sessions and apps, others from Config.Completer.
func (s *Server) completePrompt(ctx context.Context, prompt string, arg mcp.CompleteArgument, cc mcp.CompleteContext) (*mcp.Completion, error) {
	return completer{s}.CompletePromptArgument(ctx, prompt, arg, cc)
}

// completeResource completes an argument of a resource template.
func (s *Server) completeResource(ctx context.Context, uri string, arg mcp.CompleteArgument, cc mcp.CompleteContext) (*mcp.Completion, error) {
	if strings.TrimSpace(uri) == "" {
		return nil, errors.New("a resource reference needs a uri")
	}
	return completer{s}.CompleteResourceArgument(ctx, uri, arg, cc)
}
