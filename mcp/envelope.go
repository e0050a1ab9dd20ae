package mcp

import (
	"bytes"
	"encoding/json"
)

// decodeEnvelope decodes b, a JSON-RPC message, into env exactly as
// json.Unmarshal(b, env) would, error included. Every message the front
// serves is decoded here before mcp-go decodes it again, and reflection
// made this the front's largest own cost on a static tool call (4% of its
// CPU, issue #17's profile): a message of the common shape — valid JSON,
// a top-level object whose member names are spelt exactly, string members
// without escapes or non-ASCII bytes — is read by one scan for its members;
// anything else takes json.Unmarshal itself, so both agree on every input
// (FuzzEnvelopeDecodesAsEncodingJSON).
func decodeEnvelope(b []byte, env *envelope) error {
	if e, ok := scanEnvelope(b); ok {
		*env = e
		return nil
	}
	return json.Unmarshal(b, env)
}

// envelopeNames are the envelope's member names, as json.Unmarshal matches
// them (case-insensitively when no exact match).
var envelopeNames = [][]byte{[]byte("jsonrpc"), []byte("id"), []byte("method"), []byte("params"), []byte("result"), []byte("error")}

// scanEnvelope reads b when it has the common shape; ok is false when it
// does not, and json.Unmarshal must decide.
func scanEnvelope(b []byte) (e envelope, ok bool) {
	if !json.Valid(b) {
		return envelope{}, false
	}
	// From here b is valid JSON: every index below stays in range.
	i := skipSpace(b, 0)
	if b[i] != '{' {
		return envelope{}, false
	}
	i = skipSpace(b, i+1)
	if b[i] == '}' {
		return e, true
	}
	for {
		j := i + 1
		for b[j] != '"' {
			if b[j] == '\\' || b[j] >= 0x80 {
				return envelope{}, false // an escaped or non-ASCII name may fold to one of ours
			}
			j++
		}
		name := b[i+1 : j]
		i = skipSpace(b, skipSpace(b, j+1)+1) // past the colon
		end := valueEnd(b, i)
		v := b[i:end]
		switch string(name) {
		case "jsonrpc":
			if !plainString(v, &e.JSONRPC) {
				return envelope{}, false
			}
		case "method":
			if !plainString(v, &e.Method) {
				return envelope{}, false
			}
		case "id":
			e.ID = bytes.Clone(v)
		case "params":
			e.Params = bytes.Clone(v)
		case "result":
			e.Result = bytes.Clone(v)
		case "error":
			e.Error = bytes.Clone(v)
		default:
			for _, n := range envelopeNames {
				if bytes.EqualFold(name, n) {
					return envelope{}, false // json.Unmarshal would take it as n
				}
			}
		}
		i = skipSpace(b, end)
		if b[i] == '}' {
			return e, true
		}
		i = skipSpace(b, i+1) // past the comma
	}
}

// plainString sets *dst to v when v is a JSON string without escapes or
// non-ASCII bytes (so its bytes are its value), leaves it when v is null,
// and reports false for anything else.
func plainString(v []byte, dst *string) bool {
	if string(v) == "null" {
		return true
	}
	if v[0] != '"' {
		return false
	}
	s := v[1 : len(v)-1]
	for _, c := range s {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	switch string(s) { // the values of nearly every message, without a copy
	case "2.0":
		*dst = "2.0"
	case "tools/call":
		*dst = "tools/call"
	default:
		*dst = string(s)
	}
	return true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// valueEnd is the index just past the JSON value starting at b[i]; b is
// valid JSON.
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	default: // a number, true, false or null
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return i
			}
			i++
		}
		return i
	}
}

// stringEnd is the index just past the JSON string starting at b[i].
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}
