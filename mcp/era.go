package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Era rules the front applies before mcp-go sees a message. mcp-go decides a
// POST's era from the Mcp-Protocol-Version header or the body's _meta, and
// then demands _meta protocolVersion on every modern message. The 2026-07-28
// revision (SEP-2575) defines that _meta triple for requests only: a
// notification's _meta is optional and carries no version, and the official
// SDKs send notifications/cancelled without one. Refusing it made the Go SDK
// close the whole client after any cancelled call.

// removedInModern are the methods 2026-07-28 removed. A client that still
// sends one (often without _meta, as the method predates it) gets "method not
// found", not a complaint about the _meta it had no reason to send.
var removedInModern = map[string]bool{
	string(mcp.MethodInitialize):           true,
	string(mcp.MethodPing):                 true,
	string(mcp.MethodSetLogLevel):          true,
	string(mcp.MethodResourcesSubscribe):   true,
	string(mcp.MethodResourcesUnsubscribe): true,
}

// isNotification reports a message with a method and no id.
func (e envelope) isNotification() bool { return e.Method != "" && len(e.ID) == 0 }

// legacyVersions returns the revisions served over the legacy HTTP+SSE
// transport, newest first: the stateless 2026-07-28 core
// (subscriptions/listen, input_required retries) needs Streamable HTTP.
func legacyVersions() []string {
	out := make([]string, 0, len(mcp.ValidProtocolVersions))
	for _, v := range mcp.ValidProtocolVersions {
		if !mcp.IsModernProtocol(v) {
			out = append(out, v)
		}
	}
	return out
}

// metaVersion returns the protocol version a message's params._meta names, or "".
func metaVersion(params json.RawMessage) string {
	var p struct {
		Meta *mcp.Meta `json:"_meta"`
	}
	if len(params) == 0 || json.Unmarshal(params, &p) != nil || p.Meta == nil {
		return ""
	}
	return p.Meta.ProtocolVersion()
}

// removedMethodError is the answer to a modern request for a removed method:
// JSON-RPC -32601, which 2026-07-28 carries with HTTP 404.
func removedMethodError(env envelope) *rpcError {
	return &rpcError{ID: env.ID, Code: codeMethodNotFound,
		Message: fmt.Sprintf("%q was removed in protocol version %s", env.Method, mcp.ProtocolVersion20260728)}
}

// stampNotificationVersion returns body with params._meta protocolVersion
// set to version, keeping every other field, so mcp-go's modern validation
// accepts a notification that carries the version only in its header.
func stampNotificationVersion(body []byte, version string) ([]byte, error) {
	var msg map[string]json.RawMessage
	if err := json.Unmarshal(body, &msg); err != nil {
		return nil, fmt.Errorf("decoding the notification: %w", err)
	}
	params := map[string]json.RawMessage{}
	if raw, ok := msg["params"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &params); err != nil {
			return nil, fmt.Errorf("notification params must be an object: %w", err)
		}
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := params["_meta"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, fmt.Errorf("notification _meta must be an object: %w", err)
		}
	}
	v, _ := json.Marshal(version)
	meta[mcp.MetaKeyProtocolVersion] = v
	var err error
	if params["_meta"], err = json.Marshal(meta); err != nil {
		return nil, fmt.Errorf("encoding the notification: %w", err)
	}
	if msg["params"], err = json.Marshal(params); err != nil {
		return nil, fmt.Errorf("encoding the notification: %w", err)
	}
	out, err := json.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("encoding the notification: %w", err)
	}
	return out, nil
}

// modernPrecheck applies the era rules to a modern POST to /mcp. It returns
// the body to hand to mcp-go, or false when it has answered the request.
func modernPrecheck(w http.ResponseWriter, r *http.Request, body []byte, env envelope) ([]byte, bool) {
	header := r.Header.Get(headerProtocolVersion)
	switch {
	case env.isRequest() && removedInModern[env.Method]:
		writeRPCError(w, http.StatusNotFound, removedMethodError(env))
		return nil, false
	case env.isNotification() && header != "" && metaVersion(env.Params) == "":
		stamped, err := stampNotificationVersion(body, header)
		if err != nil {
			writeRPCError(w, http.StatusBadRequest, &rpcError{Code: codeInvalidParams, Message: err.Error()})
			return nil, false
		}
		return stamped, true
	}
	return body, true
}

// sseEraError refuses a modern request over legacy SSE, naming the versions
// that transport serves so the client can negotiate down; server/discover is
// let through (it answers with the same list). nil when the request may pass.
func sseEraError(env envelope) *rpcError {
	if !env.isRequest() || env.Method == string(mcp.MethodServerDiscover) {
		return nil
	}
	v := metaVersion(env.Params)
	if !mcp.IsModernProtocol(v) {
		return nil
	}
	supported := legacyVersions()
	e := mcp.UnsupportedProtocolVersionError{Version: v, Supported: supported}
	return &rpcError{ID: env.ID, Code: mcp.UNSUPPORTED_PROTOCOL_VERSION,
		Message: e.Error() + ": the HTTP+SSE transport serves only the session-based revisions; use Streamable HTTP at /mcp for " + v,
		Data:    mcp.UnsupportedProtocolVersionData{Supported: supported, Requested: v}}
}

// sseContext is the context of a request over legacy SSE: server/discover
// there advertises only the revisions that transport can serve.
func (s *Server) sseContext(ctx context.Context, r *http.Request) context.Context {
	return server.WithSupportedProtocolVersions(s.wrapContext(ctx, r), legacyVersions())
}
