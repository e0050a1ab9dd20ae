package mcp

import "github.com/mcpswarm/mcpswarm/mcp/wire"

// ResponseNode names the node that sent the request a client's JSON-RPC
// response answers, when the request carried a relay id (wire.RelayID);
// the cluster routes the response there.
func ResponseNode(body []byte) (string, bool) { return wire.ResponseNode(body) }
