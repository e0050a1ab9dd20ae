package mcp

import (
	"bytes"
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"
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

// scanEnvelope reads b when it has the common shape; ok is false when it
// does not, and json.Unmarshal must decide.
func scanEnvelope(b []byte) (e envelope, ok bool) {
	ok = members(b, func(name, v []byte) bool {
		switch string(name) {
		case "jsonrpc":
			return plainString(v, &e.JSONRPC)
		case "method":
			return plainString(v, &e.Method)
		case "id":
			e.ID = bytes.Clone(v)
		case "params":
			e.Params = bytes.Clone(v)
		case "result":
			e.Result = bytes.Clone(v)
		case "error":
			e.Error = bytes.Clone(v)
		default:
			// json.Unmarshal matches a name case-insensitively when none
			// matches exactly: such a name is one of ours to it.
			return !foldsTo(name, "jsonrpc", "id", "method", "params", "result", "error")
		}
		return true
	})
	if !ok {
		return envelope{}, false
	}
	return e, true
}

// callToolName is the "name" member of a tools/call's params, as
// json.Unmarshal into a struct with a Name string field would read it; ok
// is false when that decode fails.
func callToolName(params []byte) (name string, ok bool) {
	if members(params, func(n, v []byte) bool {
		if string(n) == "name" {
			return plainString(v, &name)
		}
		return !foldsTo(n, "name")
	}) {
		return name, true
	}
	var p struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(params, &p) != nil {
		return "", false
	}
	return p.Name, true
}

// decodeCallTool decodes b, a tools/call message, into req as
// json.Unmarshal(b, req) would, for a message of the common shape: exact
// member names without escapes, "method" and "params" once each, params
// holding only a plain "name" and "arguments", once each. ok is false for
// anything else, and json.Unmarshal must decode it; req is then untouched.
// mcp-go's decode of the same message scans the params three times
// (CallToolParams.UnmarshalJSON decodes them again, then the arguments):
// a third of a direct call's own CPU (FuzzCallToolDecodesAsEncodingJSON).
func decodeCallTool(b []byte, req *mcp.CallToolRequest) (ok bool) {
	var method string
	var params []byte
	var seen uint8
	once := func(bit uint8) bool {
		fresh := seen&bit == 0
		seen |= bit
		return fresh
	}
	if !members(b, func(name, v []byte) bool {
		switch string(name) {
		case "method":
			return once(1) && plainString(v, &method)
		case "params":
			params = v
			return once(2)
		default:
			return !foldsTo(name, "method", "params")
		}
	}) || params == nil {
		return false
	}
	var p mcp.CallToolParams
	var args []byte
	if !validMembers(params, func(name, v []byte) bool {
		switch string(name) {
		case "name":
			return once(4) && plainString(v, &p.Name)
		case "arguments":
			args = v
			return once(8)
		default:
			return false // _meta, task and the rest: mcp-go's decode
		}
	}) {
		return false
	}
	if args != nil {
		p.RawArguments = append(json.RawMessage(nil), args...)
		if string(args) == "{}" { // a click's, and most actions'
			p.Arguments = map[string]any{}
		} else if json.Unmarshal(args, &p.Arguments) != nil {
			return false
		}
	}
	*req = mcp.CallToolRequest{Params: p}
	req.Method = method
	return true
}

// foldsTo reports whether name equals one of names, lower-case ASCII
// names, but for the case of its letters. name is ASCII (members hands on
// no other), where this is all the folding json.Unmarshal does.
func foldsTo(name []byte, names ...string) bool {
	for _, n := range names {
		if len(name) != len(n) {
			continue
		}
		same := true
		for i, c := range name {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != n[i] {
				same = false
				break
			}
		}
		if same {
			return true
		}
	}
	return false
}

// members calls fn with the name and raw value of each member of the JSON
// object b, in order, until fn returns false. It reports false — and
// json.Unmarshal must decide — when b is not valid JSON or not an object,
// when a member name has an escape or a non-ASCII byte (it may fold to a
// name fn looks for), or when fn returned false.
func members(b []byte, fn func(name, v []byte) bool) bool {
	return json.Valid(b) && validMembers(b, fn)
}

// validMembers is members for b known to be valid JSON (a value members
// handed on).
func validMembers(b []byte, fn func(name, v []byte) bool) bool {
	// b is valid JSON: every index below stays in range.
	i := skipSpace(b, 0)
	if b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if b[i] == '}' {
		return true
	}
	for {
		j := i + 1
		for b[j] != '"' {
			if b[j] == '\\' || b[j] >= 0x80 {
				return false
			}
			j++
		}
		name := b[i+1 : j]
		i = skipSpace(b, skipSpace(b, j+1)+1) // past the colon
		end := valueEnd(b, i)
		if !fn(name, b[i:end]) {
			return false
		}
		i = skipSpace(b, end)
		if b[i] == '}' {
			return true
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

// decodeID decodes a message's id (valid JSON: a member the envelope scan
// handed on) as json.Unmarshal into an any would: a float64 or a string.
// An integer of up to 15 digits (exact in a float64) and a string without
// escapes or non-ASCII bytes — every client's ids — are read directly;
// anything else takes json.Unmarshal (FuzzDecodeIDAsEncodingJSON). Its
// reflection was 2% of a forwarded call's entry node.
func decodeID(raw []byte) (any, error) {
	if id, ok := scanID(raw); ok {
		return id, nil
	}
	var id any
	err := json.Unmarshal(raw, &id)
	return id, err
}

func scanID(raw []byte) (any, bool) {
	if len(raw) < 1 {
		return nil, false
	}
	if raw[0] == '"' {
		if len(raw) < 2 || raw[len(raw)-1] != '"' {
			return nil, false // not a bare string (trailing space)
		}
		var s string
		return s, plainString(raw, &s) // valid JSON: only escapes need json.Unmarshal
	}
	digits := raw
	neg := raw[0] == '-'
	if neg {
		digits = raw[1:]
	}
	if len(digits) < 1 || len(digits) > 15 || (digits[0] == '0' && (len(digits) > 1 || neg)) {
		return nil, false
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return nil, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return float64(n), true
}
