package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/mcpswarm/mcpswarm/internal/jsonq"

	"github.com/mark3labs/mcp-go/mcp"
)

// Every Append function appends one JSON-RPC message to dst and returns
// the extended slice. The bytes are json.Marshal's for the equivalent
// mcp-go value: the members in its order, values as encoding/json writes
// them (HTML characters and U+2028/U+2029 escaped, invalid UTF-8 replaced
// by U+FFFD). No trailing newline: json.Encoder's is the caller's to add.
// When json.Marshal would fail (an id or a value it cannot encode: NaN, a
// channel, a json.RawMessage that is not JSON, a failing MarshalJSON) the
// function returns dst unchanged with an error saying which part failed.
//
// An id is anything mcp.NewRequestId takes: a string or a number as
// DecodeID returns it, a json.RawMessage as Envelope.ID holds it, nil for
// null, or an mcp.RequestId.

// AppendResult appends the response to request id with result: the bytes
// of json.Marshal(mcp.JSONRPCResponse{JSONRPC: "2.0", ID:
// mcp.NewRequestId(id), Result: result}). A tool's answer
// (*mcp.CallToolResult or mcp.CallToolResult) is written by hand
// (FuzzAppendResultMatchesEncodingJSON), its member values that are
// neither text nor flags through encoding/json; any other result is
// json.Marshal's.
func AppendResult(dst []byte, id, result any) ([]byte, error) {
	start := len(dst)
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst, err := appendID(dst, id)
	if err != nil {
		return dst[:start], err
	}
	dst = append(dst, `,"result":`...)
	switch r := result.(type) {
	case *mcp.CallToolResult:
		dst, err = appendCallToolResult(dst, r)
	case mcp.CallToolResult:
		dst, err = appendCallToolResult(dst, &r)
	default:
		dst, err = appendMarshal(dst, result)
	}
	if err != nil {
		return dst[:start], fmt.Errorf("encoding the result of a JSON-RPC response: %w", err)
	}
	return append(dst, '}'), nil
}

// AppendError appends the error response to request id: the bytes of
// json.Marshal(mcp.JSONRPCError{JSONRPC: "2.0", ID: mcp.NewRequestId(id),
// Error: mcp.NewJSONRPCErrorDetails(code, message, data)}). data is
// omitted when it is nil.
func AppendError(dst []byte, id any, code int, message string, data any) ([]byte, error) {
	start := len(dst)
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst, err := appendID(dst, id)
	if err != nil {
		return dst[:start], err
	}
	dst = append(dst, `,"error":{"code":`...)
	dst = strconv.AppendInt(dst, int64(code), 10)
	dst = append(dst, `,"message":`...)
	dst = jsonq.AppendString(dst, message)
	if data != nil {
		dst = append(dst, `,"data":`...)
		if dst, err = appendMarshal(dst, data); err != nil {
			return dst[:start], fmt.Errorf("encoding the data of a JSON-RPC error: %w", err)
		}
	}
	return append(dst, "}}"...), nil
}

// AppendNotification appends a notification of method with params. With
// params an mcp.NotificationParams the bytes are those of
// json.Marshal(mcp.JSONRPCNotification{JSONRPC: "2.0", Notification:
// mcp.Notification{Method: method, Params: params}}), params omitted when
// they are the zero value; params of any other type are written as
// json.Marshal writes them, and omitted when nil.
func AppendNotification(dst []byte, method string, params any) ([]byte, error) {
	start := len(dst)
	dst = append(dst, `{"jsonrpc":"2.0","method":`...)
	dst = jsonq.AppendString(dst, method)
	if p, ok := params.(mcp.NotificationParams); ok && p.Meta == nil && p.AdditionalFields == nil {
		params = nil // Notification.Params is omitzero
	}
	if params != nil {
		dst = append(dst, `,"params":`...)
		var err error
		if dst, err = appendMarshal(dst, params); err != nil {
			return dst[:start], fmt.Errorf("encoding the params of %s: %w", method, err)
		}
	}
	return append(dst, '}'), nil
}

// AppendRequest appends a request the server sends to a client (ping,
// sampling, elicitation, roots): the bytes of
// json.Marshal(mcp.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(id),
// Params: params, Request: mcp.Request{Method: method}}) — params, omitted
// when nil, before method, as mcp-go's struct orders them.
func AppendRequest(dst []byte, id any, method string, params any) ([]byte, error) {
	start := len(dst)
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst, err := appendID(dst, id)
	if err != nil {
		return dst[:start], err
	}
	if params != nil {
		dst = append(dst, `,"params":`...)
		if dst, err = appendMarshal(dst, params); err != nil {
			return dst[:start], fmt.Errorf("encoding the params of %s: %w", method, err)
		}
	}
	dst = append(dst, `,"method":`...)
	dst = jsonq.AppendString(dst, method)
	return append(dst, '}'), nil
}

// appendCallToolResult appends r as its MarshalJSON writes it: a map, so
// its members in the order of their names. A text content without
// annotations or _meta, the flags and the strings are written here; the
// other member values are json.Marshal's, which is what the map's
// encoding writes for each.
func appendCallToolResult(dst []byte, r *mcp.CallToolResult) ([]byte, error) {
	if r == nil {
		return append(dst, "null"...), nil
	}
	var err error
	dst = append(dst, '{')
	if r.Meta != nil {
		dst = append(dst, `"_meta":`...)
		if dst, err = appendMarshal(dst, r.Meta); err != nil {
			return dst, err
		}
		dst = append(dst, ',')
	}
	dst = append(dst, `"content":[`...)
	for i, c := range r.Content {
		if i > 0 {
			dst = append(dst, ',')
		}
		if t, ok := c.(mcp.TextContent); ok && t.Annotations == nil && t.Meta == nil {
			dst = append(dst, `{"type":`...)
			dst = jsonq.AppendString(dst, t.Type)
			dst = append(dst, `,"text":`...)
			dst = jsonq.AppendString(dst, t.Text)
			dst = append(dst, '}')
		} else if dst, err = appendMarshal(dst, c); err != nil {
			return dst, err
		}
	}
	dst = append(dst, ']')
	if len(r.InputRequests) > 0 {
		dst = append(dst, `,"inputRequests":`...)
		if dst, err = appendMarshal(dst, r.InputRequests); err != nil {
			return dst, err
		}
	}
	if r.IsError {
		dst = append(dst, `,"isError":true`...)
	}
	if r.RequestState != "" {
		dst = append(dst, `,"requestState":`...)
		dst = jsonq.AppendString(dst, r.RequestState)
	}
	if r.ResultType != "" {
		dst = append(dst, `,"resultType":`...)
		dst = jsonq.AppendString(dst, string(r.ResultType))
	}
	var structured any
	if len(r.RawStructuredContent) > 0 {
		structured = r.RawStructuredContent
	} else if r.StructuredContent != nil {
		structured = r.StructuredContent
	}
	if structured != nil {
		dst = append(dst, `,"structuredContent":`...)
		if dst, err = appendMarshal(dst, structured); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// appendID appends a request id as json.Marshal(mcp.NewRequestId(id))
// writes it: a string, a number from DecodeID or the raw id of a
// message without reflection.
func appendID(dst []byte, id any) ([]byte, error) {
	switch v := id.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		return jsonq.AppendString(dst, v), nil
	case float64:
		if !math.IsInf(v, 0) && !math.IsNaN(v) {
			return appendFloat(dst, v), nil
		}
	case int:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(dst, v, 10), nil
	case mcp.RequestId:
		return appendID(dst, v.Value())
	}
	out, err := appendMarshal(dst, id)
	if err != nil {
		return dst, fmt.Errorf("encoding a JSON-RPC id: %w", err)
	}
	return out, nil
}

// appendMarshal appends json.Marshal(v). A json.RawMessage — an id as
// Envelope.ID holds it, a result or params relayed as they came — is
// compacted into dst without the copy json.Marshal makes, when it has no
// character json.Marshal would escape.
func appendMarshal(dst []byte, v any) ([]byte, error) {
	if raw, ok := v.(json.RawMessage); ok && raw != nil && !needsEscape(raw) {
		buf := bytes.NewBuffer(dst)
		if err := json.Compact(buf, raw); err != nil {
			return dst, err // json.Marshal's error too
		}
		return buf.Bytes(), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// needsEscape reports whether raw holds a byte json.Marshal escapes in a
// json.RawMessage: <, > and &, or the lead byte of U+2028 and U+2029.
func needsEscape(raw []byte) bool {
	for _, c := range raw {
		switch c {
		case '<', '>', '&', 0xe2:
			return true
		}
	}
	return false
}

// appendFloat appends a finite f as encoding/json writes a float64: like
// ES6's number to string conversion, exponents unpadded.
func appendFloat(dst []byte, f float64) []byte {
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if n := len(dst); format == 'e' && n-start >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
		dst[n-2] = dst[n-1] // e-07 to e-7
		dst = dst[:n-1]
	}
	return dst
}
