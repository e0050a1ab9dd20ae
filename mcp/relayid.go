package mcp

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// Server-to-client requests (sampling/createMessage, roots/list,
// elicitation/create, ping) are parked by mcp-go on the node whose tool
// handler sent them, under a numeric id drawn from that node's own counter.
// The client's answer is a new POST that a load balancer may send to any
// node, and two nodes may have parked the same number for one connection.
// So on the way out each such request's id is rewritten to a string naming
// this node ("mcpswarm/<node>/<n>"); the answer then says where it must go,
// and the owning node restores the number before mcp-go sees it.

const relayIDPrefix = "mcpswarm/"

// relayID is the id a server-to-client request of node carries on the
// wire: local is mcp-go's number, or "s<n>" for a request this package sent
// itself (clientreq.go).
func relayID(node, local string) string {
	return relayIDPrefix + node + "/" + local
}

// parseRelayID splits a JSON-RPC id written by relayID.
func parseRelayID(raw json.RawMessage) (node, local string, ok bool) {
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

// mcpgoID is the number of an mcp-go request in a relay id's local part.
func mcpgoID(local string) (int64, bool) {
	n, err := strconv.ParseInt(local, 10, 64)
	return n, err == nil
}

// ResponseNode names the node that sent the request a client's JSON-RPC
// response answers, when the request carried a relay id; the cluster routes
// the response there.
func ResponseNode(body []byte) (string, bool) {
	var env struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(body, &env) != nil {
		return "", false
	}
	node, _, ok := parseRelayID(env.ID)
	return node, ok
}

// withNumericID returns body (one JSON-RPC message) with its id set to n.
func withNumericID(body []byte, n int64) ([]byte, bool) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, false
	}
	m["id"] = json.RawMessage(strconv.FormatInt(n, 10))
	out, err := json.Marshal(m)
	return out, err == nil
}

var (
	sseDataPrefix = []byte("data: ")
	sseEventEnd   = []byte("\n\n")
)

// tagRequestIDs rewrites, in one SSE event as mcp-go writes it (a single
// Write of optional "id:" and "event:" lines, one "data:" line and a blank
// line), the numeric id of a server-to-client request to a relay id. Any
// other bytes are returned unchanged.
func tagRequestIDs(b []byte, node string) []byte {
	if !bytes.HasSuffix(b, sseEventEnd) || !bytes.Contains(b, []byte(`"method"`)) || !bytes.Contains(b, []byte(`"id"`)) {
		return b
	}
	start := bytes.Index(b, sseDataPrefix)
	if start < 0 || (start > 0 && b[start-1] != '\n') {
		return b
	}
	data := b[start+len(sseDataPrefix) : len(b)-len(sseEventEnd)]
	if bytes.IndexByte(data, '\n') >= 0 {
		return b
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return b
	}
	n, err := strconv.ParseInt(string(m["id"]), 10, 64)
	if err != nil || len(m["method"]) == 0 {
		return b // not a request with a numeric id: a notification or a response
	}
	id, _ := json.Marshal(relayID(node, strconv.FormatInt(n, 10)))
	m["id"] = id
	out, err := json.Marshal(m)
	if err != nil {
		return b
	}
	res := make([]byte, 0, start+len(sseDataPrefix)+len(out)+len(sseEventEnd))
	res = append(res, b[:start+len(sseDataPrefix)]...)
	res = append(res, out...)
	return append(res, sseEventEnd...)
}

// tagWriter rewrites server-to-client request ids on a GET stream.
type tagWriter struct {
	http.ResponseWriter
	node string
}

// Write rewrites a server-to-client request's id, then writes.
func (t tagWriter) Write(b []byte) (int, error) {
	out := tagRequestIDs(b, t.node)
	if _, err := t.ResponseWriter.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Flush flushes the stream.
func (t tagWriter) Flush() {
	if f, ok := t.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (t tagWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }
