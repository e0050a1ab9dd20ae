package wire

import (
	"bytes"
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"
)

// Envelope is the part of a JSON-RPC message the front inspects before it
// serves the message: its members as they are on the wire, params, result
// and error undecoded.
type Envelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// IsRequest reports a request: a method and an id that is not null.
func (e Envelope) IsRequest() bool {
	return e.Method != "" && len(e.ID) > 0 && string(e.ID) != "null"
}

// IsNotification reports a notification: a method and no id.
func (e Envelope) IsNotification() bool { return e.Method != "" && len(e.ID) == 0 }

// IsResponse reports a response (to a request the server sent): no
// method, and a result or an error.
func (e Envelope) IsResponse() bool {
	return e.Method == "" && (len(e.Result) > 0 || len(e.Error) > 0)
}

// IsPingAnswer reports an empty result: a client's answer to a keepalive
// ping, which any node acknowledges.
func (e Envelope) IsPingAnswer() bool {
	return len(e.Error) == 0 && string(bytes.Join(bytes.Fields(e.Result), nil)) == "{}"
}

// Decode decodes b, a JSON-RPC message, into env exactly as
// json.Unmarshal(b, env) would, error included: a *json.SyntaxError for
// b that is not JSON, another error for JSON of the wrong shape.
//
// Every message the front serves is decoded here, and reflection made this
// the front's largest own cost on a static tool call (4% of its CPU, issue
// #17's profile): a message of the common shape — valid JSON, a top-level
// object whose member names are spelt exactly, string members without
// escapes or non-ASCII bytes — is read by one scan for its members;
// anything else takes json.Unmarshal itself, so both agree on every input
// (FuzzEnvelopeDecodesAsEncodingJSON).
func Decode(b []byte, env *Envelope) error {
	if e, ok := scanEnvelope(b); ok {
		*env = e
		return nil
	}
	return json.Unmarshal(b, env)
}

// scanEnvelope reads b when it has the common shape; ok is false when it
// does not, and json.Unmarshal must decide.
func scanEnvelope(b []byte) (e Envelope, ok bool) {
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
		return Envelope{}, false
	}
	return e, true
}

// CallToolName is the "name" member of a tools/call's params, as
// json.Unmarshal into a struct with a Name string field would read it; ok
// is false when that decode fails (FuzzCallToolNameDecodesAsEncodingJSON).
// It picks the tool before the whole request is decoded.
func CallToolName(params []byte) (name string, ok bool) {
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

// DecodeCallTool decodes b, a tools/call message, into req as
// json.Unmarshal(b, req) would, for a message of the common shape: exact
// member names without escapes, "method" and "params" once each, params
// holding only a plain "name" and "arguments", once each. ok is false for
// anything else, and json.Unmarshal must decode it; req is then untouched.
//
// mcp-go's decode of the same message scans the params three times
// (CallToolParams.UnmarshalJSON decodes them again, then the arguments):
// a third of a direct call's own CPU. Whenever DecodeCallTool takes a
// message, the request equals json.Unmarshal's
// (FuzzCallToolDecodesAsEncodingJSON).
func DecodeCallTool(b []byte, req *mcp.CallToolRequest) (ok bool) {
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

// DecodeID decodes a message's id, raw being valid JSON (as Decode hands
// on Envelope.ID), as json.Unmarshal into an any would: a float64 or a
// string for the ids JSON-RPC allows, nil for null. An integer of up to 15
// digits (exact in a float64) and a string without escapes or non-ASCII
// bytes — every client's ids — are read directly; anything else takes
// json.Unmarshal (FuzzDecodeIDAsEncodingJSON). Its reflection was 2% of a
// forwarded call's entry node.
func DecodeID(raw []byte) (any, error) {
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
