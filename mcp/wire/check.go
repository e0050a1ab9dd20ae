package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Error is a message Check refuses: the JSON-RPC error to answer it with.
type Error struct {
	ID      json.RawMessage // the message's id, when it has a readable one
	Code    int
	Message string
}

// JSON-RPC error codes of a refused message.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// Check validates one JSON-RPC message against the batch and nesting
// limits and decodes its envelope. A batch (a JSON array) is refused: MCP
// removed batching in 2025-06-18; an oversized batch is named as such.
func Check(body []byte, maxBatch, maxDepth int) (Envelope, *Error) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return Envelope{}, &Error{Code: codeParseError, Message: "empty request body"}
	}
	elems, err := scanJSON(trimmed, maxDepth)
	if err != nil {
		return Envelope{}, &Error{Code: codeInvalidRequest, Message: err.Error()}
	}
	if trimmed[0] != '{' && !json.Valid(trimmed) {
		return Envelope{}, &Error{Code: codeParseError, Message: "request body is not valid json"}
	}
	if trimmed[0] == '[' {
		if elems > maxBatch {
			return Envelope{}, &Error{Code: codeInvalidRequest, Message: fmt.Sprintf("batch of %d messages exceeds the limit of %d", elems, maxBatch)}
		}
		return Envelope{}, &Error{Code: codeInvalidRequest, Message: "json-rpc batches are not supported (removed in MCP 2025-06-18); send one message per request"}
	}
	if trimmed[0] != '{' {
		return Envelope{}, &Error{Code: codeInvalidRequest, Message: "a json-rpc message must be an object"}
	}
	var env Envelope
	if err := Decode(trimmed, &env); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return Envelope{}, &Error{Code: codeParseError, Message: "request body is not valid json"}
		}
		return Envelope{}, &Error{Code: codeInvalidRequest, Message: "malformed json-rpc envelope"}
	}
	if env.JSONRPC != "2.0" {
		return env, &Error{ID: env.ID, Code: codeInvalidRequest, Message: "jsonrpc must be \"2.0\""}
	}
	if len(env.ID) > 0 && !validID(env.ID) {
		return env, &Error{Code: codeInvalidRequest, Message: "id must be a string, a number or null"}
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

// scanJSON checks the nesting depth of b (outside strings) and counts the
// top-level elements of an array, stopping early past maxDepth so a deep
// body costs no more than its first maxDepth+1 levels.
func scanJSON(b []byte, maxDepth int) (topElems int, err error) {
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
			if cur > maxDepth {
				return 0, fmt.Errorf("json nesting exceeds the limit of %d levels", maxDepth)
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
	return topElems, nil
}
