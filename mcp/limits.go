package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
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
// limits and decodes its envelope. A batch (a JSON array) is refused: MCP
// removed batching in 2025-06-18; an oversized
// batch is named as such.
func checkMessage(body []byte, maxBatch, maxDepth int) (wire.Envelope, *rpcError) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return wire.Envelope{}, &rpcError{Code: codeParseError, Message: "empty request body"}
	}
	depth, elems, err := scanJSON(trimmed, maxDepth)
	if err != nil {
		return wire.Envelope{}, &rpcError{Code: codeInvalidRequest, Message: err.Error()}
	}
	_ = depth
	if trimmed[0] != '{' && !json.Valid(trimmed) {
		return wire.Envelope{}, &rpcError{Code: codeParseError, Message: "request body is not valid json"}
	}
	if trimmed[0] == '[' {
		if elems > maxBatch {
			return wire.Envelope{}, &rpcError{Code: codeInvalidRequest, Message: fmt.Sprintf("batch of %d messages exceeds the limit of %d", elems, maxBatch)}
		}
		return wire.Envelope{}, &rpcError{Code: codeInvalidRequest, Message: "json-rpc batches are not supported (removed in MCP 2025-06-18); send one message per request"}
	}
	if trimmed[0] != '{' {
		return wire.Envelope{}, &rpcError{Code: codeInvalidRequest, Message: "a json-rpc message must be an object"}
	}
	var env wire.Envelope
	if err := wire.Decode(trimmed, &env); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return wire.Envelope{}, &rpcError{Code: codeParseError, Message: "request body is not valid json"}
		}
		return wire.Envelope{}, &rpcError{Code: codeInvalidRequest, Message: "malformed json-rpc wire.Envelope"}
	}
	if env.JSONRPC != "2.0" {
		return env, &rpcError{ID: env.ID, Code: codeInvalidRequest, Message: "jsonrpc must be \"2.0\""}
	}
	if len(env.ID) > 0 && !validID(env.ID) {
		return env, &rpcError{Code: codeInvalidRequest, Message: "id must be a string, a number or null"}
	}
	return env, nil
}

func validID(id json.RawMessage) bool {
	switch id[0] {
	case '"':
		return len(id) <= 258
	case 'n':
		return string(id) == "null"
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return len(id) <= 32
	}
	return false
}

// scanJSON measures the nesting depth of b (outside strings) and counts the
// top-level elements of an array, stopping early past maxDepth so a deep
// body costs no more than its first maxDepth+1 levels.
func scanJSON(b []byte, maxDepth int) (depth, topElems int, err error) {
	inStr, esc := false, false
	cur := 0
	sawValue := false
	for _, c := range b {
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
			if cur == 1 {
				sawValue = true
			}
		case '{', '[':
			if cur == 1 {
				sawValue = true
			}
			cur++
			if cur > depth {
				depth = cur
			}
			if cur > maxDepth {
				return depth, 0, fmt.Errorf("json nesting exceeds the limit of %d levels", maxDepth)
			}
		case '}', ']':
			cur--
		case ',':
			if cur == 1 {
				topElems++
			}
		case ' ', '\t', '\r', '\n':
		default:
			if cur == 1 {
				sawValue = true
			}
		}
	}
	if sawValue {
		topElems++
	}
	return depth, topElems, nil
}
