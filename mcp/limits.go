package mcp

import (
	"encoding/json"
	"fmt"

	"github.com/mcpswarm/mcpswarm/mcp/wire"
)

// JSON-RPC error codes the front answers.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternal       = -32603
)

// Default input limits.
const (
	DefaultMaxBodyBytes = 4 << 20
	DefaultMaxBatch     = 32
	DefaultMaxDepth     = 64
)

// rpcError is a JSON-RPC error answer produced by the front itself.
type rpcError struct {
	ID      json.RawMessage
	Code    int
	Message string
	Data    any
}

func (e *rpcError) Error() string { return fmt.Sprintf("json-rpc %d: %s", e.Code, e.Message) }

// marshal encodes the error answer.
func (e *rpcError) marshal() []byte {
	var id any
	if len(e.ID) > 0 {
		id = e.ID
	}
	b, err := wire.AppendError(nil, id, e.Code, e.Message, e.Data)
	if err != nil {
		// Data that cannot be encoded: the answer without it.
		b, _ = wire.AppendError(nil, id, e.Code, e.Message, nil)
	}
	return b
}

// checkMessage validates one JSON-RPC body against the batch and nesting
// limits and decodes its envelope (wire.Check).
func checkMessage(body []byte, maxBatch, maxDepth int) (wire.Envelope, *rpcError) {
	env, e := wire.Check(body, maxBatch, maxDepth)
	if e != nil {
		return env, &rpcError{ID: e.ID, Code: e.Code, Message: e.Message}
	}
	return env, nil
}
