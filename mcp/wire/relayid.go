package wire

import (
	"encoding/json"
	"strings"
)

// Server-to-client requests (sampling/createMessage, roots/list,
// elicitation/create, keepalive pings) carry an id naming the node that
// sent them, "mcpswarm/<node>/<local>": the client's answer is a new POST
// that a load balancer may send to any node, and the id says where it
// must go.
const relayIDPrefix = "mcpswarm/"

// RelayID is the id a server-to-client request of node carries on the
// wire: local is "s<n>" for a request a handler waits on, "p<n>" for a
// keepalive ping.
func RelayID(node, local string) string {
	return relayIDPrefix + node + "/" + local
}

// ParseRelayID splits a JSON-RPC id written by RelayID.
func ParseRelayID(raw json.RawMessage) (node, local string, ok bool) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", "", false
	}
	rest, found := strings.CutPrefix(s, relayIDPrefix)
	if !found {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 || i == len(rest)-1 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

// ResponseNode names the node that sent the request a client's JSON-RPC
// response answers, when the request carried a relay id.
func ResponseNode(body []byte) (string, bool) {
	var env struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(body, &env) != nil {
		return "", false
	}
	node, _, ok := ParseRelayID(env.ID)
	return node, ok
}
