package mcp

import (
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mcpswarm/mcpswarm/mcp/wire"
)

// Era rules. A POST's era comes from the Mcp-Protocol-Version header or the
// body's _meta. The 2026-07-28 revision (SEP-2575) defines the _meta triple
// for requests only: a notification's _meta is optional and carries no
// version, and the official SDKs send notifications/cancelled without one
// (refusing it made the Go SDK close the whole client after any cancelled
// call).

// removedInModern are the methods 2026-07-28 removed. A client that still
// sends one (often without _meta, as the method predates it) gets "method not
// found", not a complaint about the _meta it had no reason to send.
var removedInModern = map[string]bool{
	string(mcp.MethodInitialize):           true,
	string(mcp.MethodPing):                 true,
	string(mcp.MethodSetLogLevel):          true,
	string(mcp.MethodResourcesSubscribe):   true,
	string(mcp.MethodResourcesUnsubscribe): true,
	string(mcp.MethodTasksResult):          true,
	string(mcp.MethodTasksList):            true,
}

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
func removedMethodError(env wire.Envelope) *rpcError {
	return &rpcError{ID: env.ID, Code: codeMethodNotFound,
		Message: fmt.Sprintf("%q was removed in protocol version %s", env.Method, mcp.ProtocolVersion20260728)}
}

// sseEraError refuses a modern request over legacy SSE, naming the versions
// that transport serves so the client can negotiate down; server/discover is
// let through (it answers with the same list). nil when the request may pass.
func sseEraError(env wire.Envelope) *rpcError {
	if !env.IsRequest() || env.Method == string(mcp.MethodServerDiscover) {
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
